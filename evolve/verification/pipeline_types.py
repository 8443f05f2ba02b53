"""A pipeline's data types, apart from its loader (``pipeline.py``), so that the stages can name them
without importing the loader, which imports the stage registry."""

from __future__ import annotations

from dataclasses import dataclass, field

POLICIES = ("continue", "stop_first")


@dataclass(frozen=True)
class StageConfig:
    """One stage of a pipeline."""

    name: str  # a registered stage (evolve.verification.stages.STAGES)
    weight: float = 1.0  # share of the reward (weights are normalised over the stages that apply)
    required: bool = True  # a failing required stage fails the sample; optional ones only cost reward
    options: dict = field(default_factory=dict, hash=False, compare=False)  # stage-specific settings


@dataclass(frozen=True)
class Limits:
    """Sandbox limits for one sample."""

    timeout_s: float = 3.0  # wall clock for all of a sample's tests; the process group is killed
    cpu_s: float = 2.0  # RLIMIT_CPU
    memory_mb: int = 512  # RLIMIT_AS
    # Longest completion (or chat reply) verified, in characters; a longer one fails as
    # "CompletionTooLong" before any parse in this process (a 2.8 MB one took the parser to 1.7 GB).
    max_completion_chars: int = 131072


@dataclass(frozen=True)
class Pipeline:
    """An ordered list of stages, a failure policy and the reward weights."""

    stages: tuple[StageConfig, ...]
    policy: str = "continue"  # "continue": later stages still give feedback; "stop_first": AVO-style
    partial_credit: bool = True  # test stages score the fraction of tests passed
    strict_types: bool = True  # exact type match on results (2.0 != 2, True != 1)
    limits: Limits = Limits()
    name: str = "default"
    source: str = "<builtin>"

    def stage(self, name: str) -> StageConfig | None:
        return next((s for s in self.stages if s.name == name), None)
