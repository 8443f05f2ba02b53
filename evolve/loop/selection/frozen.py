"""The prompt lever off (``mode = "weights"``): the current prompt gets every sample, nothing is judged."""

from __future__ import annotations

from dataclasses import dataclass

from evolve.loop.config import GenerationSeeds
from evolve.loop.context import LoopContext, Timer
from evolve.loop.selection.base import Arm, Judged, Judgement
from evolve.loop.state import LoopState
from evolve.metrics import UpdateRecord


@dataclass(frozen=True)
class Frozen:
    type: str = "frozen"

    def arms(self, ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, group_size: int) -> list[Arm]:
        return [Arm(ctx.evolver.current(), group_size)]

    def update_record(self, carried_groups: int, distill_groups: int) -> UpdateRecord:
        return {"carried_groups": carried_groups}

    def judge(self, ctx: LoopContext, state: LoopState, judged: Judged, timer: Timer) -> Judgement:
        return Judgement(metrics={"gate": []})  # weights-only runs have always recorded an empty gate
