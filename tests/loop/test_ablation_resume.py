"""benchmarks/ablation.py continues a run that was killed (kill -9 mid-generation) from its newest
committed generation, for the generations it had left (resume equals a straight run:
test_resume_identical). The ablation's real-model runs take an hour each on 2 cores, so a stop must not cost a
run. CI-preset model, real sandbox, SQLite."""

from __future__ import annotations

import importlib.util

from loop_helpers import REPO, LoopDB, fingerprints, kill9_when


def _ablation():
    spec = importlib.util.spec_from_file_location("ablation_bench", REPO / "benchmarks" / "ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CONFIG = """[loop]
mode = "weights"
generations = 2
policy = "policies/tiny-coder-ci.toml"
suite = "tiny-coder"
seed_prompt = "prompts/tiny-coder.toml"
tasks_per_generation = 2
samples_per_task = 4
heldout_tasks = 2
heldout_samples = 2
heldout_ks = [1]
heldout_final_tasks = 3
heldout_final_samples = 2
"""


def test_a_killed_run_resumes_where_it_stopped(tmp_path, tiny_model_dir):
    ab = _ablation()
    config = tmp_path / "weights-only.toml"
    config.write_text(CONFIG)
    name = "weights-only-s0"
    db = LoopDB(f"sqlite:///{tmp_path / (name + '.db')}")
    kill9_when(db, name, ["run", "--config", str(config), "--seed", "0", "--name", name], committed=2)
    assert db.statuses(name)[:2] == ["committed", "committed"]
    before = fingerprints(db, name, committed_only=True)

    rec = ab.run_one(tmp_path, config, "weights-only", 0)

    assert rec["resumed"] is True
    assert [g["index"] for g in rec["generations"]] == [0, 1, 2]  # not run past the config's generations
    assert rec["generations"][-1]["heldout_full"] is not None  # the final full figure is taken on resume
    after = fingerprints(db, name, committed_only=True)
    assert len(before) == 2 and len(after) == 3 and after[:2] == before  # continued, not redone
    assert "resume weights-only-s0 from generation 1" in (tmp_path / f"{name}.log").read_text()
    assert ab.run_one(tmp_path, config, "weights-only", 0) == rec  # a finished run is read back, not run


def _kept_runs():
    spec = importlib.util.spec_from_file_location("kept_runs", REPO / "benchmarks" / "kept_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_run_kept_on_one_machine_resumes_from_the_copy_on_another(tmp_path, tiny_model_dir):
    """The powered ablation spans sessions whose machines are gone by the next: ``--keep`` copies each run
    (lineage snapshot; an unfinished run's artifacts) into the repository and restores it into a bare
    batch folder, where the run continues from its newest committed generation and a finished one is
    read back, not run again."""
    ab, kept_runs = _ablation(), _kept_runs()
    first, second, kept = tmp_path / "machine1", tmp_path / "machine2", tmp_path / "kept"
    first.mkdir()
    config = first / "weights-only.toml"
    config.write_text(CONFIG)
    name = "weights-only-s0"
    db = LoopDB(f"sqlite:///{first / (name + '.db')}")
    kill9_when(db, name, ["run", "--config", str(config), "--seed", "0", "--name", name], committed=2)
    before = fingerprints(db, name, committed_only=True)

    assert kept_runs.keep(first, kept) == [name]
    assert (kept / f"{name}.artifacts.tar.gz").exists() and not (kept / f"{name}.json").exists()
    assert kept_runs.restore(kept, second) == [name]
    assert kept_runs.restore(kept, second) == []  # what the folder has is never overwritten
    rec = ab.run_one(second, config, "weights-only", 0)

    assert rec["resumed"] is True and [g["index"] for g in rec["generations"]] == [0, 1, 2]
    after = fingerprints(LoopDB(f"sqlite:///{second / (name + '.db')}"), name, committed_only=True)
    assert after[:2] == before  # the copy continued, nothing redone

    kept_runs.keep(second, kept)  # finished: its record, no artifacts
    assert (kept / f"{name}.json").exists() and not (kept / f"{name}.artifacts.tar.gz").exists()
    third = tmp_path / "machine3"
    assert kept_runs.restore(kept, third) == [name]
    assert ab.run_one(third, config, "weights-only", 0) == rec  # read back, not run
