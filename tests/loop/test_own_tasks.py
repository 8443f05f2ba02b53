"""A user's own tasks through the real CLI, with no code: `evolve run` on a task JSONL commits
generations whose rollouts are those tasks (train rollouts from the train split, held-out ones from the
recorded held-out ids), `evolve eval` on the same file prints pass@k, a run resumes only on the same
tasks, and a dataset saved to disk with a column mapping runs and evaluates the same way."""

from __future__ import annotations

import json
import shutil

import pytest
from loop_helpers import CI_CONFIG, REPO

from evolve.env.task_source import heldout_ids

EXAMPLE = REPO / "docs" / "examples" / "tasks.jsonl"
IDS = [json.loads(line)["task_id"] for line in EXAMPLE.read_text().splitlines()]


def _purposes(db, run: str) -> tuple[list[dict[str, set[str]]], dict]:
    store = db.store()
    try:
        out = []
        for g in store.lineage(run):
            assert g["status"] == "committed"
            by: dict[str, set[str]] = {}
            for r in store.rollouts(store.resolve_generation(g["name"]).id):
                by.setdefault(r.purpose, set()).add(r.task_id)
            out.append(by)
        return out, store.get_run(run).config
    finally:
        store.close()


def test_a_task_file_runs_resumes_on_the_same_tasks_and_evaluates(module_sqlite_loop_db, tmp_path):
    db = module_sqlite_loop_db
    tasks = tmp_path / "mine.jsonl"
    shutil.copy(EXAMPLE, tasks)
    config_file = tmp_path / "mine.toml"  # the CI config but for the split's seed: one difference
    config_file.write_text(f'extends = "{CI_CONFIG}"\n[loop]\nsplit_seed = 5\n')
    db.evolve("run", "--config", str(config_file), "--suite", str(tasks), "--name", "mine", "--generations", "1")
    gens, config = _purposes(db, "mine")
    held = heldout_ids(IDS, 5, 0.25)
    assert held != heldout_ids(IDS, 0, 0.25)
    assert config["suite_split"]["heldout"] and set(config["suite_split"]["heldout"]) == held
    assert config["loop"]["suite"] == str(tasks) and config["task_source"]["tasks"] == 10
    assert len(gens) == 2 and gens[0]["heldout"] == held == gens[1]["heldout"]
    assert gens[1]["train"] and gens[1]["train"] <= set(IDS) - held  # the file's train split, nothing else

    original = tasks.read_text()
    tasks.write_text(original.replace('"expected": 8}', '"expected": 9}', 1))
    proc = db.evolve("resume", "mine", "--generations", "1", check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "changed since the run was recorded" in lines[0], proc.stderr
    tasks.write_text(original)
    db.evolve("resume", "mine", "--generations", "1")
    gens, _ = _purposes(db, "mine")
    assert len(gens) == 3 and gens[2]["train"] <= set(IDS) - held and gens[2]["heldout"] == held

    out = db.evolve("eval", "mine:2", "--suite", str(tasks), "--samples", "2", "--k", "1,2").stdout
    assert "pass@1=" in out and "pass@2=" in out  # (the table's header wraps with the tmp path's length)
    report = json.loads(db.evolve("eval", "mine:2", "--suite", str(tasks), "--samples", "2", "--k", "1,2",
                                  "--json").stdout)
    assert set(report["tasks"]) == held and 0 <= report["overall"]["pass@2"] <= 1  # the run's split, unasked
    assert (report["n_tasks"], report["samples"]) == (2, 2)


def test_a_dataset_on_disk_with_a_column_mapping_runs_and_evaluates(module_sqlite_loop_db, tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    ds = datasets.Dataset.from_list([
        {"id": 100 + i, "question": r["prompt"], "fn": r["entry_point"],
         "public": json.dumps(r.get("visible_tests", [])), "private": json.dumps(r.get("hidden_tests", [])),
         "check": r.get("test")} for i, r in enumerate(rows)])
    ds.save_to_disk(str(tmp_path / "problems"))
    cols = "task_id=id,prompt=question,entry_point=fn,visible_tests=public,hidden_tests=private,test=check"
    db = module_sqlite_loop_db
    db.evolve("run", "--config", CI_CONFIG, "--suite", str(tmp_path / "problems"), "--columns", cols,
              "--name", "ds", "--generations", "1")
    gens, config = _purposes(db, "ds")
    ids = [str(100 + i) for i in range(10)]
    held = heldout_ids(ids, 0, 0.25)
    assert config["loop"]["task_columns"]["prompt"] == "question" and set(config["suite_split"]["heldout"]) == held
    assert gens[1]["heldout"] == held and gens[1]["train"] and gens[1]["train"] <= set(ids) - held
    out = db.evolve("eval", "--policy", "policies/tiny-coder-ci.toml", "--suite", str(tmp_path / "problems"),
                    "--columns", cols, "--split", "all", "--samples", "2", "--k", "1,2").stdout
    assert "pass@2=" in out and "(10 tasks x 2 samples)" in out
