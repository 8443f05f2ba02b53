"""Seed prompts: ``prompts/*.toml`` with a ``[components]`` table of name = text."""

from __future__ import annotations

import tomllib
from pathlib import Path

from evolve.errors import ConfigError
from evolve.prompt.candidate import Candidate


def load_seed_prompt(path: str | Path) -> Candidate:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"seed prompt {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"seed prompt {path}: {e}") from None
    comps = data.get("components")
    if not isinstance(comps, dict) or not comps:
        raise ConfigError(f"seed prompt {path}: needs a non-empty [components] table")
    bad = [k for k, v in comps.items() if not isinstance(v, str)]
    if bad:
        raise ConfigError(f"seed prompt {path}: component(s) {', '.join(bad)} must be text")
    return Candidate(dict(comps))
