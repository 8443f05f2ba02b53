"""The tiny-coder suite declaration (verifiers/tiny_coder.toml) and ``load_gym``."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

from pydantic import Field

from evolve.errors import ConfigError
from evolve.gym.generate import SUITE, GymParams, generate, subset
from evolve.util.config_model import ConfigModel, validate_as
from evolve.verification.types import Task

SPLITS = ("train", "heldout")
DEFAULT_TOML = "verifiers/tiny_coder.toml"
_REPO_ROOT = Path(__file__).resolve().parents[2]


def _find_toml(path_or_name: str | Path | None) -> Path | None:
    if path_or_name is not None and str(path_or_name) not in (SUITE, "tiny_coder"):
        p = Path(path_or_name)
        if not p.is_file():
            raise ConfigError(f"suite file not found: {p}")
        return p
    for base in (Path.cwd(), _REPO_ROOT):
        if (base / DEFAULT_TOML).is_file():
            return base / DEFAULT_TOML
    return None  # defaults in code


class SuiteTable(ConfigModel):
    """The ``[suite]`` table."""

    name: str = Field(SUITE, description="The suite's name.")
    seed: int = Field(0, description="Task seed used by load_suite (inputs, variants).")


class SuiteFile(ConfigModel):
    """A gym suite file: ``[suite]`` and ``[generator]`` (GymParams)."""

    suite: SuiteTable = Field(SuiteTable(), description="Name and task seed.")
    generator: GymParams = Field(GymParams(), description="The generator's parameters.")


def read_suite_toml(path: Path | None) -> tuple[GymParams, dict]:
    """(generator params, the [suite] table) from a suite TOML; defaults when ``path`` is None."""
    if path is None:
        return GymParams(), SuiteTable().model_dump()
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read suite TOML: {e}") from None
    table = data.get("suite", {})
    gone = sorted(set(table) - set(SuiteTable.model_fields)) if isinstance(table, dict) else []
    if gone:  # generator / pipeline / completion were declared here but never read: the environment owns them
        raise ConfigError(f"{path}: [suite] key {gone[0]!r} is not read (known: {', '.join(SuiteTable.model_fields)}); "
                          "the environment (evolve/env/suites.py) owns the generator, pipeline and reply format")
    parsed = validate_as(SuiteFile, data, str(path))
    return parsed.generator, parsed.suite.model_dump()


@functools.lru_cache(maxsize=8)
def _generate_cached(split: str, seed: int, params: GymParams) -> tuple[Task, ...]:
    from evolve.gym.cache import cached_tasks

    return tuple(cached_tasks(split, seed, params, lambda: generate(split, seed, params)))


def load_gym(split: str = "train", seed: int = 0, n: int | None = None,
             suite: str | Path | None = None) -> list[Task]:
    """Tasks of one split, deterministic for ``seed``; ``n`` picks a deterministic subset.

    The held-out compositions are fixed by ``split_seed`` in the suite TOML, so
    every task seed keeps held-out compositions out of train.
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown gym split {split!r}; expected one of {SPLITS}")
    params, _ = read_suite_toml(_find_toml(suite))
    return subset(list(_generate_cached(split, int(seed), params)), n, seed)


def load_suite(path_or_name: str | Path = SUITE) -> dict[str, list[Task]]:
    """Every split of the suite, with the seed the TOML declares."""
    path = _find_toml(path_or_name)
    params, table = read_suite_toml(path)
    seed = int(table.get("seed", 0))
    return {s: list(_generate_cached(s, seed, params)) for s in SPLITS}
