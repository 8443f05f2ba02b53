"""Seed prompts: ``prompts/*.toml`` with a ``[components]`` table of name = text."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import Field

from evolve.errors import ConfigError
from evolve.prompt.candidate import Candidate
from evolve.util.config_model import ConfigModel, validate_as


class SeedPromptFile(ConfigModel):
    """A seed prompt file (the one config style: unknown keys refused, one-line errors)."""

    components: dict[str, str] = Field(min_length=1, description="The prompt's components by name (system, "
                                       "lessons, demos, ...): the text evolution starts from; at least one.")


def load_seed_prompt(path: str | Path) -> Candidate:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"seed prompt {path} does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"seed prompt {path}: {e}") from None
    return Candidate(dict(validate_as(SeedPromptFile, data, f"seed prompt {path}").components))
