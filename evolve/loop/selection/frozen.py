"""The prompt lever off (``mode = "weights"``): the current prompt gets every sample, nothing is judged."""

from __future__ import annotations

from dataclasses import dataclass

from evolve.loop.selection.base import Arm
from evolve.rollout import Rollout


@dataclass(frozen=True)
class Frozen:
    type: str = "frozen"

    def arms(self, ctx, state, seeds, group_size: int) -> list[Arm]:
        return [Arm(ctx.evolver.current(), group_size)]

    def update_record(self, carried_groups: int, distill_groups: int) -> dict:
        return {"carried_groups": carried_groups}

    def judge(self, ctx, state, index: int, seeds, arms: list[Arm], tasks, out, timer) -> list[Rollout]:
        out.metrics["gate"] = []  # weights-only runs have always recorded an empty gate
        return []
