"""Fixtures for verification tests: one real sandbox per pipeline, shared by the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.verification import Task, TestCase, Verifier, load_pipeline
from evolve.verification.pipeline import pipeline_from_dict

REPO = Path(__file__).resolve().parents[2]

ADD = Task(
    task_id="add", prompt='def add(a, b):\n    """Return a + b."""\n', entry_point="add",
    visible_tests=(TestCase((1, 2), 3),),
    hidden_tests=(TestCase((0, 0), 0), TestCase((-1, 5), 4), TestCase((10, 20), 30)),
    canonical_solution="    return a + b\n",
)


@pytest.fixture(scope="session")
def verifier():
    """The default pipeline, full isolation where available."""
    with Verifier(None, jobs=2) as v:
        yield v


@pytest.fixture(scope="session")
def short_verifier():
    """Short limits, for timeouts and bombs."""
    import tomllib

    from evolve.verification.pipeline import DEFAULT_TOML

    d = tomllib.loads(DEFAULT_TOML)
    d["limits"] = {"timeout_s": 1.0, "cpu_s": 1.0, "memory_mb": 256}
    with Verifier(pipeline_from_dict(d, "<test>"), jobs=2) as v:
        yield v


@pytest.fixture(scope="session")
def he_verifier():
    with Verifier(load_pipeline(REPO / "verifiers" / "humaneval.toml"), jobs=2) as v:
        yield v


@pytest.fixture(scope="session")
def humaneval():
    from evolve.verification import load_humaneval

    return load_humaneval()


@pytest.fixture
def add_task():
    return ADD
