"""The gym's disk cache (evolve/gym/cache.py) gives exactly the tasks the generator builds, keys on
everything they depend on, and rebuilds a damaged file."""

from __future__ import annotations

import pytest

from evolve.gym import cache
from evolve.gym.generate import GymParams, generate

SMALL = GymParams(train_variants=1)  # every composition, one variant: the value types of the whole gym


def _full(t):
    return (t, t.meta, [(type(c.expected), [type(a) for a in c.inputs]) for c in t.hidden_tests + t.visible_tests])


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_RUNS_DIR", str(tmp_path))
    monkeypatch.delenv("EVOLVE_GYM_CACHE", raising=False)
    return tmp_path


def test_cached_tasks_equal_the_generated_ones_value_and_type(runs):
    built = generate("train", 0, SMALL)
    calls = []
    first = cache.cached_tasks("train", 0, SMALL, lambda: calls.append(1) or generate("train", 0, SMALL))
    again = cache.cached_tasks("train", 0, SMALL, lambda: calls.append(1) or generate("train", 0, SMALL))
    assert calls == [1]  # built once, then read
    assert [_full(t) for t in again] == [_full(t) for t in first] == [_full(t) for t in built]
    assert [t.content_hash for t in again] == [t.content_hash for t in built]
    assert any(isinstance(a, list) for t in again for c in t.hidden_tests for a in c.inputs)  # lists stay lists


def test_the_key_covers_split_seed_params_and_source(runs, monkeypatch):
    keys = {cache._key("train", 0, SMALL), cache._key("heldout", 0, SMALL), cache._key("train", 1, SMALL),
            cache._key("train", 0, SMALL.model_copy(update={"visible": 3}))}
    assert len(keys) == 4
    before = cache._key("train", 0, SMALL)
    monkeypatch.setattr(cache, "_source_digest", lambda: "an edited generator")
    assert cache._key("train", 0, SMALL) != before


def test_a_damaged_file_is_rebuilt_and_the_cache_can_be_turned_off(runs, monkeypatch):
    tasks = generate("heldout", 0, SMALL)
    cache.cached_tasks("heldout", 0, SMALL, lambda: tasks)
    (path,) = (runs / "cache" / "gym").glob("heldout-*")
    path.write_bytes(path.read_bytes()[:100])
    assert cache.cached_tasks("heldout", 0, SMALL, lambda: tasks) == tasks
    assert cache._decode(path.read_bytes()) == tasks  # rewritten whole
    monkeypatch.setenv("EVOLVE_GYM_CACHE", "0")
    path.unlink()
    assert cache.cached_tasks("heldout", 0, SMALL, lambda: tasks) == tasks and not path.exists()
