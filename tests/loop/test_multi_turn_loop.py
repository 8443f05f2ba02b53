"""Multi-turn episodes through the coupled loop (CI-preset model, real sandbox, real SQLite, the
real CLI): the self-repair environment's transcripts are stored, and resume, fork and replay are
hash-equal to a run that went straight through."""

from __future__ import annotations

import json

import pytest
from loop_helpers import fingerprints_by_index, straight_and_resumed

CONFIG = """
[loop]
mode = "coupled"
generations = 2
seed = 0
policy = "policies/tiny-coder-ci.toml"
suite = "tiny-coder-repair"
max_turns = 2
seed_prompt = "prompts/tiny-coder.toml"
tasks_per_generation = 2
samples_per_task = 4
heldout_tasks = 3
heldout_samples = 2
heldout_ks = [1, 2]
prompt.proposals_per_step = 1
"""


@pytest.fixture(scope="module")
def runs(module_sqlite_loop_db, tmp_path_factory):  # SQLite only: conftest
    cfg = tmp_path_factory.mktemp("cfg") / "repair.toml"
    cfg.write_text(CONFIG)
    return straight_and_resumed(module_sqlite_loop_db, cfg)


def test_transcripts_are_stored_with_turn_rewards(runs):
    store = runs.store()
    try:
        gen = store.resolve_generation("straight:1")
        rolls = store.rollouts(gen.id)
    finally:
        store.close()
    multi = [r for r in rolls if r.turns and sum(t["role"] == "assistant" for t in r.turns) == 2]
    assert multi, "the CI model fails visible tests: some episodes must have a repair turn"
    for r in multi:
        roles = [t["role"] for t in r.turns]
        assert roles == ["assistant", "user", "assistant"]
        assert r.completion == r.turns[-1]["content"]
        assert all(isinstance(t["reward"], float) for t in r.turns if t["role"] == "assistant")
        assert r.turns[0]["observation_hash"] and r.turns[2]["observation_hash"]
    assert all(r.turns for r in rolls)  # every episode of a repair environment has its transcript


def test_resume_is_hash_equal_to_the_straight_run(runs):
    straight, cut = fingerprints_by_index(runs, "straight"), fingerprints_by_index(runs, "cut")
    assert sorted(straight) == sorted(cut) == [0, 1, 2]
    for i in straight:
        assert straight[i] == cut[i], f"generation {i}"


def test_fork_and_replay_are_hash_equal(runs):
    runs.evolve("resume", "straight", "--from", "straight:1", "--generations", "1")
    runs.evolve("resume", "cut", "--from", "cut:1", "--generations", "1")
    straight, cut = fingerprints_by_index(runs, "straight"), fingerprints_by_index(runs, "cut")
    assert straight[3] == cut[3] and straight[3]["n_rollouts"] > 0
    for ref in ("straight:2", "cut:3"):
        proc = runs.evolve("replay", ref, "--json", check=False)
        report = json.loads(proc.stdout)
        assert proc.returncode == 0 and report["ok"] and report["rollouts_equal"], report["first_difference"]

