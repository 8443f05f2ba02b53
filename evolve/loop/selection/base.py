"""The one extension point of prompt selection (in the style of gepa's ``strategies/``): which
prompts get samples of a generation's groups, and what the verified groups decide.

A generation (``evolve.loop.controller.run_generation``) asks its rule for the arms, rolls every arm
out with one seed (common random numbers), verifies, routes and updates the weights, then hands the
verified rollouts back to the rule's ``judge``: it promotes or retires prompts, reflects, and returns
the rollouts (if any) that the next weight update should also train on. Implementations: in-group
(``in_group.py``), the gate (``gate.py``), and frozen (``frozen.py``: the prompt lever is off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from evolve.loop.config import GenerationSeeds
from evolve.loop.context import LoopContext, Outcome, Timer
from evolve.loop.state import LoopState
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


class PromptSelection(Protocol):
    """A prompt-selection rule; stateless (its state lives in the evolver and the LoopState)."""

    type: str

    def arms(self, ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, group_size: int) -> list[Arm]:
        """Which prompts share each task's ``group_size`` samples this generation."""
        ...

    def update_record(self, carried_groups: int, distill_groups: int) -> dict[str, int]:
        """What this rule records next to the update's stats (as recorded since the rule existed)."""
        ...

    def judge(self, ctx: LoopContext, state: LoopState, index: int, seeds: GenerationSeeds, arms: list[Arm],
              tasks: list[Task], out: Outcome, timer: Timer) -> list[Rollout]:
        """After the update: score, promote or retire, reflect; returns the rollouts to carry into the
        next weight update."""
        ...
