"""Resume is the same as never stopping, at the loop level: a run killed with kill -9 in the middle
of a generation and resumed gives a lineage byte-identical to a run that went straight through
(prompt hashes, weights sha256, every rollout's completion, reward and verdict, every metric but
wall-clock timings), in each mode. CI-preset model, real sandbox, SQLite (and PostgreSQL when
EVOLVE_TEST_PG_URL is set)."""

from __future__ import annotations

import pytest
from loop_helpers import BACKENDS, CI_CONFIG, fingerprints, kill9_when, make_loop_db

GENERATIONS = 3  # generation 0 plus three; the kill lands in generation 2


# Every mode on SQLite; on PostgreSQL (when configured) the coupled mode only, for CI time: the modes
# differ in the loop, not in the store.
CASES = [("sqlite", "coupled", "verifier"), ("sqlite", "weights", "random"), ("sqlite", "prompt", "verifier")]
CASES += [("postgres", "coupled", "verifier")] if "postgres" in BACKENDS else []


@pytest.fixture
def case_dbs(request, tmp_path, tiny_model_dir):
    """Two databases of one kind: the straight run and the interrupted one run at the same time,
    each in its own database (two writers on one SQLite file can time out on a loaded machine)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = make_loop_db(request.param, tmp_path / "a"), make_loop_db(request.param, tmp_path / "b")
    yield next(a), next(b)
    for gen in (a, b):
        next(gen, None)


@pytest.mark.parametrize("case_dbs, mode, reward", CASES, indirect=["case_dbs"])
def test_resume_after_kill9_equals_straight_run(case_dbs, mode, reward, tmp_path):
    straight_db, loop_db = case_dbs
    common = ["--config", CI_CONFIG, "--mode", mode, "--reward", reward]
    log = tmp_path / "straight.log"
    straight = straight_db.popen("run", *common, "--name", "straight", "--generations", str(GENERATIONS), log=log)
    try:  # the two runs share the machine's two cores
        kill9_when(loop_db, "cut", ["run", *common, "--name", "cut", "--generations", str(GENERATIONS)],
                   committed=2)
    finally:
        assert straight.wait(timeout=600) == 0, log.read_text()[-2000:]
    assert loop_db.statuses("cut")[:2] == ["committed", "committed"]
    left = GENERATIONS + 1 - loop_db.statuses("cut").count("committed")
    assert left >= 1
    assert loop_db.evolve("check", "cut").returncode == 0  # what was committed before the kill is intact
    loop_db.evolve("resume", "cut", "--generations", str(left))  # discards the half-written generation

    straight, resumed = fingerprints(straight_db, "straight"), fingerprints(loop_db, "cut")
    assert [f["status"] for f in resumed] == ["committed"] * (GENERATIONS + 1)
    assert [f["index"] for f in resumed] == list(range(GENERATIONS + 1))
    for a, b in zip(straight, resumed, strict=True):
        assert a == b, f"generation {a['index']} differs after resume"
    assert all(f["n_rollouts"] > 0 for f in straight)
    # the mode really is what it says: the frozen lever never moves, the other one does
    weights = {f["weights_sha256"] for f in straight}
    prompts = {f["prompt_version"] for f in straight}
    if mode == "prompt":
        assert len(weights) == 1
    else:
        assert len(weights) >= 2, "a weights-learning run never moved the weights"
    if mode == "weights":
        assert len(prompts) == 1
