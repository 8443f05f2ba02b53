"""What a generation works with and what it produces: the context built once per process by the
runner, the Outcome a generation returns, and the rollout budget's arithmetic. Shared by the
controller and the prompt-selection rules (``evolve.loop.selection``), so neither imports the other."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from evolve.env.base import Environment, Generator, Verifying
from evolve.loop.config import GenerationSeeds, LoopConfig
from evolve.loop.rollouts import PENDING_WEIGHTS
from evolve.loop.routing import Routing
from evolve.loop.state import LoopState
from evolve.metrics import GenerationMetrics, UpdateRecord
from evolve.prompt.candidate import Candidate
from evolve.prompt.evolver import PromptEvolver, Proposal
from evolve.rollout import Rollout
from evolve.verification.types import Task

if TYPE_CHECKING:
    from evolve.policy.stats import UpdateStats


class LoopPolicy(Generator, Protocol):
    """What the loop needs of a policy (``evolve.policy.Policy``): sampling plus the weights' side."""

    tokenizer: object

    @property
    def can_update(self) -> bool: ...

    def begin_generation(self) -> None: ...

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


class _ProposalKeys(TypedDict):
    proposal: Proposal
    accepted: bool  # gate: passed the minibatch; in_group/value: admitted to the challenger pool
    minibatch: dict[str, float] | None  # task -> mean score (gate)
    parent_minibatch: dict[str, float] | None


class ProposalRecord(_ProposalKeys, total=False):
    """One proposal a generation judged; ``runner.commit_outcome`` stores it as a prompt version (these
    keys go into its meta). Not a metric: it holds the Proposal object."""

    meta: dict[str, Any]  # {"skipped": ...} or {"selection", "admitted_to_pool"}
    val: dict[str, float]  # gate: task -> validation mean, proposal and parent
    parent_val: dict[str, float]
    gate: dict[str, Any]  # gate: the validation sign-flip test + "promoted"


@dataclass
class Outcome:
    """Everything a generation produced, ready to commit (or to compare, in replay). The controller
    fills it from what each phase returns; only the runner adds to it afterwards (its timings)."""

    index: int
    seeds: GenerationSeeds
    prompt: Candidate
    loop_state: LoopState  # the state the generation advanced (the runner stores it with the generation)
    rollouts: list[Rollout] = field(default_factory=list)  # in the order produced (replay compares it)
    proposals: list[ProposalRecord] = field(default_factory=list)
    update_stats: UpdateRecord | None = None
    metrics: GenerationMetrics = field(default_factory=lambda: GenerationMetrics())
    timings: dict[str, float] = field(default_factory=dict)
    parent_weights: str = PENDING_WEIGHTS
    budget_left: int | None = None  # learning rollouts left when the generation started
    routing: Routing = field(default_factory=Routing)
    update_groups: list[list[Rollout]] = field(default_factory=list)  # exactly what the weight update was given


class Timer:
    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - t0


Progress = Callable[[str], None]  # told each phase's name as the generation enters it


def tick(progress: Progress | None, phase: str) -> None:
    if progress is not None:
        progress(phase)


def plan_batch(tasks: int, group: int, left: int | None) -> tuple[int, int]:
    """(tasks, samples per task) of a generation's training batch that fit in ``left`` rollouts."""
    if left is None or left >= tasks * group:
        return tasks, group
    if left >= group:
        return left // group, group
    return (1, left) if left > 0 else (0, group)


def budget_left(cfg: LoopConfig, state: LoopState, spent: Iterable[Rollout]) -> int | None:
    """Learning rollouts this generation may still spend, ``spent`` being its rollouts so far (None = no
    budget)."""
    if cfg.max_rollouts is None:
        return None
    return cfg.max_rollouts - state.rollouts_spent - sum(1 for r in spent if r.purpose != "heldout")
