"""Stage 1: the program parses and compiles (done by the fork-server before it forks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evolve.verification.stages.base import StageContext, clip, register
from evolve.verification.types import StageResult, TestFailure

if TYPE_CHECKING:
    from evolve.verification.pipeline_types import StageConfig


class CompileStage:
    name = "compile"

    def applies(self, ctx: StageContext) -> bool:
        return True

    def run(self, ctx: StageContext, cfg: StageConfig) -> StageResult:
        if not ctx.completion.strip():
            f = TestFailure("compile", "EmptyCompletion", "the completion is empty")
            return StageResult("compile", 0.0, False, "EmptyCompletion: the completion is empty",
                               "EmptyCompletion", [f])
        err = ctx.reply.compile_error
        if err:
            kind = err.split(":", 1)[0] or "SyntaxError"
            f = TestFailure("compile", kind, clip(err, 300))
            return StageResult("compile", 0.0, False, clip(err, 300), kind, [f])
        return StageResult("compile", 1.0, True, "compiled")


register("compile", CompileStage)
