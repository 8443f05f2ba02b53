"""The lineage: every run, generation, prompt and weights version, rollout and lm call, with artifacts.

See docs/architecture.md ("Lineage") for the API the other parts code against. Names are
loaded on first use, so `evolve lineage` (Core only) never pays for importing the ORM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_WHERE = {
    "ArtifactStore": "evolve.lineage.artifacts", "LineageStore": "evolve.lineage.store",
    "SCHEMA_HEAD": "evolve.lineage.tables",
    **{name: "evolve.lineage.models" for name in (
        "Artifact", "Base", "Generation", "LMCall", "PromptLMCall", "PromptParent", "PromptVersion",
        "RolloutRecord", "Run", "Task", "WeightsVersion")},
}
__all__ = [
    "SCHEMA_HEAD", "Artifact", "ArtifactStore", "Base", "Generation", "LMCall", "LineageStore", "PromptLMCall",
    "PromptParent", "PromptVersion", "RolloutRecord", "Run", "Task", "WeightsVersion",
]

if TYPE_CHECKING:
    from evolve.lineage.artifacts import ArtifactStore
    from evolve.lineage.models import (
        Artifact,
        Base,
        Generation,
        LMCall,
        PromptLMCall,
        PromptParent,
        PromptVersion,
        RolloutRecord,
        Run,
        Task,
        WeightsVersion,
    )
    from evolve.lineage.store import LineageStore
    from evolve.lineage.tables import SCHEMA_HEAD


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evolve.lineage' has no attribute {name!r}")
