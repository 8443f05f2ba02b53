"""What a generation works with and what it produces: the context built once per process by the
runner, the Outcome a generation returns, and the rollout budget's arithmetic. Shared by the
controller and the prompt-selection rules (``evolve.loop.selection``), so neither imports the other."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from evolve.env.base import Environment, Generator, Verifying
from evolve.loop.config import GenerationSeeds, LoopConfig
from evolve.loop.rollouts import PENDING_WEIGHTS
from evolve.loop.routing import Routing
from evolve.loop.state import LoopState
from evolve.prompt.candidate import Candidate
from evolve.prompt.evolver import PromptEvolver
from evolve.rollout import Rollout
from evolve.verification.types import Task

if TYPE_CHECKING:
    from evolve.policy.stats import UpdateStats


class LoopPolicy(Generator, Protocol):
    """What the loop needs of a policy (``evolve.policy.Policy``): sampling plus the weights' side."""

    can_update: bool
    tokenizer: object

    def update(self, groups: list[list[Rollout]]) -> UpdateStats: ...

    def weights_hash(self) -> str: ...

    def save(self, directory) -> object: ...


@dataclass
class LoopContext:
    """What a generation works with; built once per process by the runner."""

    config: LoopConfig
    policy: LoopPolicy  # evolve.policy Policy
    verifier: Verifying  # evolve.verification.Verifier (wrapped by the environment)
    evolver: PromptEvolver
    train_tasks: list[Task]
    heldout_tasks: list[Task]
    val_tasks: list[Task]  # the gate's validation tasks ([] under in-group selection)
    tasks_by_id: dict[str, Task]
    learn_weights: bool
    learn_prompt: bool
    all_heldout_tasks: list[Task] = field(default_factory=list)  # for the full held-out figure
    env: Environment | None = None  # who owns the episode; None = the single-turn default rendering
    # a verifier version (``verifier_version``): task id -> the task before its tests were added; the
    # tasks above carry the added tests, and held-out is also scored on these ({} = no version)
    original_tasks: dict[str, Task] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.env is None:
            from evolve.env.suites import SuiteEnv

            self.env = SuiteEnv("tasks", lambda: {"train": self.train_tasks, "heldout": self.heldout_tasks})


@dataclass
class Outcome:
    """Everything a generation produced, ready to commit (or to compare, in replay)."""

    index: int
    seeds: GenerationSeeds
    prompt: Candidate
    rollouts: list[Rollout] = field(default_factory=list)
    proposals: list[dict] = field(default_factory=list)  # {"proposal", "accepted", scores...}
    update_stats: dict | None = None
    metrics: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    loop_state: LoopState | None = None
    parent_weights: str = PENDING_WEIGHTS
    budget_left: int | None = None  # learning rollouts left when the generation started
    routing: Routing = field(default_factory=Routing)
    update_groups: list = field(default_factory=list)  # exactly what the weight update was given


class Timer:
    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - t0


def tick(progress, phase: str) -> None:
    if progress is not None:
        progress(phase)


def plan_batch(tasks: int, group: int, left: int | None) -> tuple[int, int]:
    """(tasks, samples per task) of a generation's training batch that fit in ``left`` rollouts."""
    if left is None or left >= tasks * group:
        return tasks, group
    if left >= group:
        return left // group, group
    return (1, left) if left > 0 else (0, group)


def budget_left(cfg: LoopConfig, state: LoopState, out: Outcome) -> int | None:
    """Learning rollouts this generation may still spend (None = no budget)."""
    if cfg.max_rollouts is None:
        return None
    return cfg.max_rollouts - state.rollouts_spent - sum(1 for r in out.rollouts if r.purpose != "heldout")
