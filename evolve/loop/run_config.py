"""A run's settings, resolved: the config file's ``[loop]`` and ``[cluster]`` tables, the policy spec
the loop names, and dotted command-line overrides of any of their fields.

``--loop.samples_per_task 8``, ``--loop.selection.promote_alpha 0.05``, ``--loop.prompt.max_merges 0``,
``--policy.sampling.temperature 0.7``, ``--cluster.verifier_actors 4`` (``--NAME=VALUE`` too). The
paths come from the models' schemas (``evolve.util.config_model.field_paths``), so a new field is
settable the day it is declared. Overrides apply after the file, in the order given; what a run
records is the resolved whole. The older flags are aliases of dotted names (``ALIASES``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolve.errors import ConfigError
from evolve.loop.config import LoopConfig, loop_table, run_roots
from evolve.util.config_model import apply_override, field_paths, is_model, members
from evolve.util.toml_files import read_toml

# Flags that predate dotted overrides -> the dotted name each sets (kept: scripts and docs use them).
ALIASES = {"generations": "loop.generations", "mode": "loop.mode", "reward": "loop.reward", "seed": "loop.seed",
           "policy": "loop.policy", "suite": "loop.suite", "max_turns": "loop.max_turns",
           "reflection_lm": "loop.prompt.reflection_lm", "reflection_api_base": "loop.prompt.api_base",
           "verifier_version": "loop.verifier_version"}


@dataclass(frozen=True)
class RunSettings:
    loop: LoopConfig
    spec: Any  # PolicySpec
    cluster: Any  # ClusterConfig


def parse_overrides(args: list[str]) -> tuple[str | None, list[tuple[str, str]]]:
    """(a bare CONFIG path if one is given, [(dotted path, raw value)]) from the words after a command.
    ``--a.b VALUE`` and ``--a.b=VALUE``; anything else is a one-line ConfigError."""
    config, out, i = None, [], 0
    while i < len(args):
        word = args[i]
        if word.startswith("--") and "." in word.split("=", 1)[0]:
            name, eq, value = word[2:].partition("=")
            if not eq:
                if i + 1 >= len(args):
                    raise ConfigError(f"--{name}: needs a value")
                i += 1
                value = args[i]
            root = name.split(".", 1)[0]
            if root not in run_roots():
                raise ConfigError(f"--{name}: no such setting (dotted settings start with "
                                  f"{', '.join(f'--{r}.' for r in run_roots())})")
            out.append((name, value))
        elif not word.startswith("-") and config is None:
            config = word
        else:
            raise ConfigError(f"{word}: not an option of this command (settings are --loop.NAME, --policy.NAME, "
                              "--cluster.NAME VALUE; `evolve config --fields` lists them)")
        i += 1
    return config, out


def _override(data: dict[str, Any], model, root: str, overrides: list[tuple[str, str]]) -> dict[str, Any]:
    for name, raw in overrides:
        head, _, path = name.partition(".")
        if head == root:
            data = apply_override(data, model, path, raw, root)
    return data


def resolve(config: str | Path | None, overrides: list[tuple[str, str]], model: str | None = None,
            ray: str | None = None, need_cluster: bool = True) -> RunSettings:
    """The loop config (file, then ``--loop.*``), its policy spec (``loop.policy``, then ``--model``,
    then ``--policy.*``) and ``[cluster]`` (then ``--cluster.*``; ``ray`` = ``--ray ADDRESS``)."""
    from evolve.cluster import ClusterConfig
    from evolve.policy import PolicySpec

    data = read_toml(config, not_found="config file not found") if config else {}
    cfg = LoopConfig.from_dict(loop_table(data), source=str(config)) if config else LoopConfig()
    if any(name.startswith("loop.") for name, _ in overrides):
        cfg = LoopConfig.from_dict(_override(cfg.to_dict(), LoopConfig, "loop", overrides), source="command line",
                                   where="--loop")
    spec = PolicySpec.from_toml(cfg.policy)
    if model:
        spec = spec.with_model(model)
    spec = override_spec(spec, overrides)
    cluster = None
    if need_cluster:
        table = _override(dict(data.get("cluster") or {}), ClusterConfig, "cluster", overrides)
        cluster = ClusterConfig.from_dict(table, source=str(config or "command line"), address=ray)
    return RunSettings(cfg, spec, cluster)


def override_spec(spec, overrides: list[tuple[str, str]], only_policy: bool = False):
    """``spec`` with the ``--policy.*`` overrides applied (``only_policy``: any other root is an error,
    for commands that take a policy and no loop config: `evolve eval`)."""
    from evolve.policy import PolicySpec

    other = next((name for name, _ in overrides if not name.startswith("policy.")), None) if only_policy else None
    if other:
        raise ConfigError(f"--{other}: this command takes a policy spec: only --policy.NAME settings")
    if not any(name.startswith("policy.") for name, _ in overrides):
        return spec
    data = _override(spec.model_dump(mode="json"), PolicySpec, "policy", overrides)
    return PolicySpec.from_dict(data, source="command line")


def alias_overrides(**flags: Any) -> list[tuple[str, str]]:
    """The older flags given (not None) as dotted overrides, before any dotted one (which wins)."""
    return [(ALIASES[k], str(v)) for k, v in flags.items() if v is not None]


def all_fields() -> dict[str, tuple[str, str]]:
    """Every dotted setting -> (its type, its description): the reference `evolve config --fields` prints."""
    out: dict[str, tuple[str, str]] = {}
    for root, model in run_roots().items():
        for path, annotation in field_paths(model, f"{root}.").items():
            out[path] = (_type_name(annotation), _description(model, path.split(".")[1:]))
    return out


def _type_name(annotation: Any) -> str:
    return str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _description(model, parts: list[str]) -> str:
    info = model.model_fields[parts[0]]
    if len(parts) == 1:
        return info.description or ""
    for m in members(info.annotation):
        if is_model(m) and parts[1] in m.model_fields:
            return _description(m, parts[1:])
    return ""
