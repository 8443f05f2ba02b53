"""Optional stage: the candidate's test time against the canonical solution's, same sandbox.

Score = min(1, slack * t_canonical / t_candidate); passes when within ``slack`` times. Both times
are the job's CPU seconds as the server measured them with wait4 (the job cannot report its own
time), and CPU-noisy at the millisecond scale, so a floor of 1 ms is added to each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from evolve.util.config_model import ConfigModel
from evolve.verification.stages.base import StageContext, register
from evolve.verification.types import StageResult, TestFailure

if TYPE_CHECKING:
    from evolve.verification.pipeline_types import StageConfig

_FLOOR_S = 0.001


class PerfOptions(ConfigModel):
    """The perf stage's settings (keys of its ``[[stages]]`` table)."""

    slack: float = Field(3.0, gt=0.0, description="Pass when at most slack x the canonical solution's time.")


class PerfStage:
    name = "perf"
    Options = PerfOptions

    def applies(self, ctx: StageContext) -> bool:
        return ctx.baseline_time_s is not None and ctx.reply.time_s is not None

    def run(self, ctx: StageContext, cfg: StageConfig) -> StageResult:
        slack = PerfOptions.model_validate(cfg.options).slack
        base = max(0.0, ctx.baseline_time_s) + _FLOOR_S  # never below the floor: no division by zero
        mine = max(0.0, ctx.reply.time_s) + _FLOOR_S
        ratio = mine / base
        score = min(1.0, slack / ratio)
        trace = f"{ratio:.2f}x the canonical solution's time ({mine * 1e3:.1f} ms vs {base * 1e3:.1f} ms)"
        if ratio <= slack:
            return StageResult("perf", score, True, trace)
        f = TestFailure("perf", "TooSlow", trace)
        return StageResult("perf", score, False, trace + f" > {slack:g}x", "TooSlow", [f])


register("perf", PerfStage)
