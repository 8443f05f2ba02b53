"""The prompt lever off (``mode = "weights"``): the current prompt gets every sample, nothing is judged."""

from __future__ import annotations

from dataclasses import dataclass

from evolve.loop.config import GenerationSeeds
from evolve.loop.context import LoopContext, Outcome, Timer
from evolve.loop.selection.base import Arm
from evolve.loop.state import LoopState
from evolve.rollout import Rollout
from evolve.verification.types import Task


@dataclass(frozen=True)
class Frozen:
    type: str = "frozen"

    def arms(self, ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, group_size: int) -> list[Arm]:
        return [Arm(ctx.evolver.current(), group_size)]

    def update_record(self, carried_groups: int, distill_groups: int) -> dict[str, int]:
        return {"carried_groups": carried_groups}

    def judge(self, ctx: LoopContext, state: LoopState, index: int, seeds: GenerationSeeds, arms: list[Arm],
              tasks: list[Task], out: Outcome, timer: Timer) -> list[Rollout]:
        out.metrics["gate"] = []  # weights-only runs have always recorded an empty gate
        return []
