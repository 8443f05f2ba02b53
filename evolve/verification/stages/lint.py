"""Optional stage: ruff on the program (undefined names, syntax-level problems by default)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from evolve.util.config_model import ConfigModel
from evolve.verification.stages.base import StageContext, clip, register
from evolve.verification.types import StageResult, TestFailure

if TYPE_CHECKING:
    from evolve.verification.pipeline_types import StageConfig


_MAX_REPORT = 4 << 20  # bytes of ruff's JSON report read; beyond, the stage fails unparsed
_MAX_KEPT = 20  # findings kept in the result


def _ruff() -> str | None:
    here = Path(sys.executable).with_name("ruff")
    return str(here) if here.exists() else shutil.which("ruff")


class LintOptions(ConfigModel):
    """The lint stage's settings (keys of its ``[[stages]]`` table)."""

    select: tuple[str, ...] = Field(("E9", "F"), strict=False, description="ruff rule codes checked.")
    max_findings: int = Field(5, ge=1, description="Findings that take the score to 0; each costs 1/max_findings.")


class LintStage:
    name = "lint"
    Options = LintOptions

    def applies(self, ctx: StageContext) -> bool:
        return _ruff() is not None and not ctx.reply.compile_error

    def run(self, ctx: StageContext, cfg: StageConfig) -> StageResult:
        options = LintOptions.model_validate(cfg.options)
        select, max_findings = ",".join(options.select), options.max_findings
        # --isolated: no configuration file is read; --ignore-noqa: the candidate's own suppression
        # comments (per line or file-level) cannot silence the findings it is scored on. A scrubbed environment:
        # no RUFF_* variable of the caller's changes the rules either.
        cmd = [_ruff(), "check", "--no-cache", "--isolated", "--ignore-noqa", "--select", select,
               "--output-format", "json", "--stdin-filename", "candidate.py", "-"]
        try:
            p = subprocess.run(cmd, input=ctx.program, capture_output=True, text=True, timeout=20, errors="replace",
                               env={"NO_COLOR": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd="/")
            if len(p.stdout) > _MAX_REPORT:
                found = None  # a flood of findings: a failure, never parsed (60,000 made an 8 MiB row)
            else:
                found = json.loads(p.stdout or "[]")
                if not isinstance(found, list) or not all(isinstance(f, dict) for f in found):
                    raise ValueError("ruff's report is not a list of findings")
        except (OSError, subprocess.TimeoutExpired, ValueError, RecursionError) as e:
            return StageResult("lint", 0.0, False, clip(f"ruff failed: {e}", 300), "LintError", skipped=True)
        if found is None:
            msg = f"ruff: over {_MAX_REPORT} bytes of findings"
            return StageResult("lint", 0.0, False, msg, "Lint", [TestFailure("lint", "lint", msg)])
        if not found:
            return StageResult("lint", 1.0, True, "ruff: clean")
        # Kept: the first _MAX_KEPT findings (a sample's row stays small); the score counts them all.
        failures = [TestFailure("lint", str(f.get("code") or "lint")[:20], clip(f"{f.get('code')} {f.get('message')} "
                                f"(line {(f.get('location') or {}).get('row')})", 200)) for f in found[:_MAX_KEPT]]
        score = max(0.0, 1.0 - len(found) / max_findings)
        trace = clip(f"ruff: {len(found)} finding(s): " + "; ".join(f.message for f in failures[:5]))
        return StageResult("lint", score, False, trace, "Lint", failures)


register("lint", LintStage)
