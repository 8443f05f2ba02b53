"""ORM classes mapped onto the Core tables of ``tables.py`` (the schema lives there).

Columns are attributes of the same names (``RolloutRecord.group`` is the ``group_index``
column). Objects returned by LineageStore are detached: read them, do not lazy-load.
"""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from evolve.lineage import tables
from evolve.lineage.tables import GENERATION_STATUSES, KNOWN_REVISIONS, SCHEMA_HEAD, utcnow

__all__ = [
    "GENERATION_STATUSES", "KNOWN_REVISIONS", "SCHEMA_HEAD", "Artifact", "Base", "Generation", "LMCall",
    "PromptLMCall", "PromptParent", "PromptVersion", "RolloutRecord", "Run", "Task", "WeightsVersion", "utcnow",
]


class Base(DeclarativeBase):
    metadata = tables.metadata


class Run(Base):
    __table__ = tables.run


class Artifact(Base):
    __table__ = tables.artifact


class Task(Base):
    __table__ = tables.task


class PromptVersion(Base):
    __table__ = tables.prompt_version


class PromptParent(Base):
    __table__ = tables.prompt_parent


class PromptLMCall(Base):
    __table__ = tables.prompt_lm_call


class WeightsVersion(Base):
    __table__ = tables.weights_version


class Generation(Base):
    __table__ = tables.generation

    def name(self, run_name: str) -> str:
        return f"{run_name}:{self.index}"


class LMCall(Base):
    __table__ = tables.lm_call


class RolloutRecord(Base):
    __table__ = tables.rollout
