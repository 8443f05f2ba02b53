"""ORM models of the lineage database (schema head; migrations in ``migrations/versions``).

Identities are content hashes wherever the object is content (prompt versions,
weights versions, artifacts, lm-call requests); generations and runs get integer
ids. A change here needs a new Alembic revision, and ``SCHEMA_HEAD`` must follow it
(a test compares these models with the migrated schema).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# The newest revision these models describe, and every revision this code knows.
# Kept as constants so read-only commands need not import Alembic.
SCHEMA_HEAD = "0002"
KNOWN_REVISIONS = ("0001", "0002")

GENERATION_STATUSES = ("pending", "committed", "failed")
HASH = 64  # length of a sha256 hex digest


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class Run(Base):
    __tablename__ = "run"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    config: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    code_version: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    package_versions: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)


class Artifact(Base):
    """A durable blob under ``runs_dir/<run>/artifacts``; the row exists only once the file does."""

    __tablename__ = "artifact"

    sha: Mapped[str] = mapped_column(String(HASH), primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(40), nullable=False, default="blob")  # blob | manifest
    size: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class Task(Base):
    __tablename__ = "task"
    __table_args__ = (UniqueConstraint("suite", "task_id", "content_hash", name="uq_task_identity"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200), nullable=False)
    task_id: Mapped[str] = mapped_column(String(300), nullable=False)
    content_hash: Mapped[str] = mapped_column(String(HASH), nullable=False)


class PromptVersion(Base):
    """A prompt candidate; ``id`` = ``Candidate(components).id``."""

    __tablename__ = "prompt_version"

    id: Mapped[str] = mapped_column(String(HASH), primary_key=True)
    components: Mapped[dict] = mapped_column(JSON, nullable=False)
    proposed_by: Mapped[str] = mapped_column(String(40), nullable=False, default="seed")
    meta: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class PromptParent(Base):
    """Edges of the prompt DAG (a merge has two parents); ``position`` keeps their order."""

    __tablename__ = "prompt_parent"

    child: Mapped[str] = mapped_column(ForeignKey("prompt_version.id", ondelete="CASCADE"), primary_key=True)
    parent: Mapped[str] = mapped_column(ForeignKey("prompt_version.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, nullable=False, default=0)


class PromptLMCall(Base):
    """The reflection calls that produced a prompt version."""

    __tablename__ = "prompt_lm_call"

    prompt_version: Mapped[str] = mapped_column(
        ForeignKey("prompt_version.id", ondelete="CASCADE"), primary_key=True)
    lm_call_id: Mapped[int] = mapped_column(ForeignKey("lm_call.id", ondelete="CASCADE"), primary_key=True)


class WeightsVersion(Base):
    """A set of policy weights; ``id`` = content_hash of {artifact_sha, parent, base_model, kind}."""

    __tablename__ = "weights_version"

    id: Mapped[str] = mapped_column(String(HASH), primary_key=True)
    artifact_sha: Mapped[str | None] = mapped_column(String(HASH))  # checkpoint (folder manifest); None = base as is
    weights_sha256: Mapped[str | None] = mapped_column(String(HASH))  # hash over the parameters
    parent: Mapped[str | None] = mapped_column(ForeignKey("weights_version.id"))
    base_model: Mapped[str] = mapped_column(String(300), nullable=False, default="")
    kind: Mapped[str] = mapped_column(String(20), nullable=False, default="full")  # full | adapter | base
    optimizer_artifact: Mapped[str | None] = mapped_column(String(HASH))
    stats: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class Generation(Base):
    __tablename__ = "generation"
    __table_args__ = (
        UniqueConstraint("run_id", "index", name="uq_generation_run_index"),
        Index("ix_generation_parent", "parent_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), nullable=False)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("generation.id"))
    index: Mapped[int] = mapped_column(Integer, nullable=False)  # per-run sequence number, not the depth
    prompt_version: Mapped[str | None] = mapped_column(ForeignKey("prompt_version.id"))
    weights_version: Mapped[str | None] = mapped_column(ForeignKey("weights_version.id"))
    seeds: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)
    rng_artifact: Mapped[str | None] = mapped_column(String(HASH))
    state_artifact: Mapped[str | None] = mapped_column(String(HASH))
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="pending")
    metrics: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)
    timings: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)  # rev 0002
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    committed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    def name(self, run_name: str) -> str:
        return f"{run_name}:{self.index}"


class LMCall(Base):
    """One language-model call; ``request_hash`` = content_hash(request) keys the replay cache."""

    __tablename__ = "lm_call"
    __table_args__ = (Index("ix_lm_call_request_hash", "request_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation_id: Mapped[int | None] = mapped_column(ForeignKey("generation.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(40), nullable=False)
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    request: Mapped[dict] = mapped_column(JSON, nullable=False)
    request_hash: Mapped[str] = mapped_column(String(HASH), nullable=False)
    response: Mapped[dict | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    tokens: Mapped[dict] = mapped_column(JSON, nullable=False, default=dict)
    latency_s: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class RolloutRecord(Base):
    """A stored :class:`evolve.rollout.Rollout` with its verdict."""

    __tablename__ = "rollout"
    __table_args__ = (Index("ix_rollout_generation", "generation_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation_id: Mapped[int] = mapped_column(ForeignKey("generation.id", ondelete="CASCADE"), nullable=False)
    task_id: Mapped[str] = mapped_column(String(300), nullable=False)
    group: Mapped[int] = mapped_column("group_index", Integer, nullable=False, default=0)
    sample_index: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    prompt_version: Mapped[str] = mapped_column(String(HASH), nullable=False)
    weights_version: Mapped[str] = mapped_column(String(HASH), nullable=False)
    purpose: Mapped[str] = mapped_column(String(16), nullable=False, default="train")
    prompt: Mapped[str] = mapped_column(Text, nullable=False, default="")
    completion: Mapped[str] = mapped_column(Text, nullable=False, default="")
    reward: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    advantage: Mapped[float | None] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    error_class: Mapped[str | None] = mapped_column(String(100))
    stages: Mapped[list] = mapped_column(JSON, nullable=False, default=list)
    trace: Mapped[str] = mapped_column(Text, nullable=False, default="")
    hack_flags: Mapped[list] = mapped_column(JSON, nullable=False, default=list)
    truncated: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)  # rev 0002
