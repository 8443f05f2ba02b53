"""The lineage: every run, generation, prompt and weights version, rollout and lm call, with artifacts.

See docs/architecture.md ("Lineage") for the API the other parts code against.
"""

from evolve.lineage.artifacts import ArtifactStore
from evolve.lineage.models import (
    SCHEMA_HEAD,
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

__all__ = [
    "SCHEMA_HEAD", "Artifact", "ArtifactStore", "Base", "Generation", "LMCall", "LineageStore", "PromptLMCall",
    "PromptParent", "PromptVersion", "RolloutRecord", "Run", "Task", "WeightsVersion",
]
