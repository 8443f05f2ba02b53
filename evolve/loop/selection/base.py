"""The one extension point of prompt selection (in the style of gepa's ``strategies/``): which
prompts get samples of a generation's groups, and what the verified groups decide.

A generation (``evolve.loop.controller.run_generation``) asks its rule for the arms, rolls every arm
out with one seed (common random numbers), verifies, routes and updates the weights, then hands the
verified rollouts back to the rule's ``judge`` (one ``Judged``): it promotes or retires prompts,
reflects, and returns a ``Judgement``: the proposals it judged, the rollouts it spent doing so, its
metrics and the rollouts (if any) that the next weight update should also train on. The controller
puts these into the generation's Outcome; a rule never writes into it. Implementations: in-group
(``in_group.py``), the gate (``gate.py``), and frozen (``frozen.py``: the prompt lever is off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from evolve.loop.config import GenerationSeeds
from evolve.loop.context import LoopContext, ProposalRecord, Timer
from evolve.loop.routing import Routing
from evolve.loop.state import LoopState
from evolve.metrics import SelectionMetrics, UpdateRecord
from evolve.prompt.candidate import Candidate
from evolve.prompt.challengers import Challenger
from evolve.rollout import Rollout
from evolve.verification.types import Task


@dataclass
class Arm:
    """One prompt's share of every task's group this generation (the incumbent's arm comes first)."""

    candidate: Candidate
    samples: int
    challenger: Challenger | None = None  # under in-group selection
    rollouts: list[Rollout] = field(default_factory=list)  # filled by the controller


@dataclass(frozen=True)
class Judged:
    """What a rule judges, after the weight update: this generation's index and seeds, the arms with
    their verified rollouts, the batch's tasks, how its groups were routed, and every rollout the
    generation has spent so far (train and guided: what the rollout budget has left depends on them)."""

    index: int
    seeds: GenerationSeeds
    arms: list[Arm]
    tasks: list[Task]
    routing: Routing
    spent: list[Rollout]


@dataclass
class Judgement:
    """What a rule's ``judge`` returns; the controller appends ``rollouts`` to the generation's, sets its
    proposals and merges ``metrics`` into its metrics (in this key order)."""

    carry: list[Rollout] = field(default_factory=list)  # into the next weight update
    proposals: list[ProposalRecord] = field(default_factory=list)
    rollouts: list[Rollout] = field(default_factory=list)  # spent evaluating proposals (gate), in order
    metrics: SelectionMetrics = field(default_factory=lambda: SelectionMetrics())


class PromptSelection(Protocol):
    """A prompt-selection rule; stateless (its state lives in the evolver and the LoopState)."""

    @property
    def type(self) -> str:
        """The ``[loop.selection] type`` it implements (``frozen``: the prompt lever is off)."""
        ...

    def arms(self, ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, group_size: int) -> list[Arm]:
        """Which prompts share each task's ``group_size`` samples this generation."""
        ...

    def update_record(self, carried_groups: int, distill_groups: int) -> UpdateRecord:
        """What this rule records next to the update's stats (as recorded since the rule existed)."""
        ...

    def judge(self, ctx: LoopContext, state: LoopState, judged: Judged, timer: Timer) -> Judgement:
        """After the update: score, promote or retire, reflect."""
        ...
