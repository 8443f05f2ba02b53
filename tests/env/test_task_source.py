"""A user's own tasks as an environment: a task JSONL or a dataset saved to disk, a column mapping,
a split that depends only on the ids and the seed, and one-line errors naming file, line and field
(through the real CLI: nothing is run, no database is made)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evolve.env import load_environment
from evolve.env.task_source import heldout_ids, parse_columns
from evolve.errors import ConfigError
from evolve.verification import Verifier

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "tasks.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in EXAMPLE.read_text().splitlines()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _split(name: str, **options) -> dict[str, list[str]]:
    parts = load_environment(name, **options).splits()
    return {k: [t.task_id for t in v] for k, v in parts.items()}


def test_the_example_file_splits_by_ids_and_seed_not_by_row_order(tmp_path):
    rows = _rows()
    ids = [r["task_id"] for r in rows]
    a = _split(str(EXAMPLE), split_seed=0, heldout_fraction=0.25)
    assert sorted(a["train"] + a["heldout"]) == sorted(ids) and not set(a["train"]) & set(a["heldout"])
    assert len(a["heldout"]) == 2 and set(a["heldout"]) == heldout_ids(ids, 0, 0.25)
    backwards = _split(str(_write(tmp_path / "rev.jsonl", rows[::-1])), split_seed=0, heldout_fraction=0.25)
    assert set(backwards["heldout"]) == set(a["heldout"])  # the same tasks in another order: the same split
    others = [set(_split(str(EXAMPLE), split_seed=s, heldout_fraction=0.25)["heldout"]) for s in range(1, 6)]
    assert any(o != set(a["heldout"]) for o in others)  # the seed chooses
    assert len(_split(str(EXAMPLE), split_seed=0, heldout_fraction=0.5)["heldout"]) == 5


def test_the_run_records_the_heldout_ids_and_a_digest_of_the_tasks(tmp_path):
    env = load_environment(str(EXAMPLE), split_seed=3, heldout_fraction=0.25)
    rec = env.record
    assert rec["suite_split"] == {"split_seed": 3, "heldout_fraction": 0.25,
                                  "heldout": [t.task_id for t in env.splits()["heldout"]]}
    assert rec["task_source"]["tasks"] == 10 and len(rec["task_source"]["sha256"]) == 64
    rows = _rows()
    same = load_environment(str(_write(tmp_path / "tasks.jsonl", rows[::-1])), split_seed=3).record
    assert same["task_source"]["sha256"] == rec["task_source"]["sha256"]
    rows[4]["hidden_tests"][0]["expected"] = 99
    changed = load_environment(str(_write(tmp_path / "tasks.jsonl", rows)), split_seed=3).record
    assert changed["task_source"]["sha256"] != rec["task_source"]["sha256"]


def test_the_example_tasks_are_solvable_in_the_sandbox():
    """Every example row's tests accept its canonical solution and refuse a wrong one (real sandbox)."""
    from evolve.verification.tasks import load_tasks

    tasks = load_tasks(EXAMPLE)
    assert len(tasks) == 10 and all(t.canonical_solution for t in tasks)
    pairs = [(t, t.canonical_solution) for t in tasks]
    pairs += [(t, "def f(xs):\n    return 0\n" if t.entry_point == "f" else "    return a - b\n") for t in tasks]
    with Verifier(None, jobs=2) as v:
        passed = [r.passed for r in v.verify_batch(pairs)]
    assert passed == [True] * 10 + [False] * 10


def test_a_column_mapping_reads_other_names(tmp_path):
    renamed = [{"id": r["task_id"], "question": r["prompt"], "fn": r["entry_point"],
                **{k: v for k, v in r.items() if k not in ("task_id", "prompt", "entry_point")}} for r in _rows()]
    path = _write(tmp_path / "renamed.jsonl", renamed)
    cols = parse_columns("task_id=id, prompt=question,entry_point=fn")
    assert _split(str(path), task_columns=cols) == _split(str(EXAMPLE))
    with pytest.raises(ConfigError, match=r"renamed.jsonl:1: missing or non-string field 'task_id'"):
        load_environment(str(path))
    with pytest.raises(ConfigError, match="unknown task field 'promt'"):
        parse_columns("promt=question")
    with pytest.raises(ConfigError, match="is not FIELD=COLUMN"):
        parse_columns("prompt")


def _dataset(rows: list[dict]):
    datasets = pytest.importorskip("datasets")
    # A dataset's own shape: an integer id, other column names, the tests as JSON strings.
    return datasets.Dataset.from_list([
        {"id": i, "question": r["prompt"], "fn": r["entry_point"],
         "public": json.dumps(r["visible_tests"]) if "visible_tests" in r else None,  # a null cell: no tests
         "private": json.dumps(r.get("hidden_tests", [])),
         "check": r.get("test")} for i, r in enumerate(rows)])


DS_COLUMNS = {"task_id": "id", "prompt": "question", "entry_point": "fn", "visible_tests": "public",
              "hidden_tests": "private", "test": "check"}


def test_a_dataset_saved_to_disk_is_an_environment(tmp_path):
    ds = _dataset(_rows())
    ds.save_to_disk(str(tmp_path / "ds"))
    env = load_environment(str(tmp_path / "ds"), split_seed=0, heldout_fraction=0.25, task_columns=DS_COLUMNS)
    parts = env.splits()
    assert env.name == "ds" and len(parts["train"]) == 8 and len(parts["heldout"]) == 2
    assert {t.task_id for t in parts["heldout"]} == heldout_ids([str(i) for i in range(10)], 0, 0.25)
    add = next(t for t in parts["train"] + parts["heldout"] if t.entry_point == "add")
    assert add.check_code and not add.visible_tests  # its null cell of a test column: no tests
    first = next(t for t in parts["train"] + parts["heldout"] if t.task_id == "0")
    assert first.hidden_tests[2].inputs == ([5, -4, 6, -1, 2],) and first.hidden_tests[2].expected == 8
    ds.shuffle(seed=1).flatten_indices().save_to_disk(str(tmp_path / "shuffled"))
    again = load_environment(str(tmp_path / "shuffled"), split_seed=0, task_columns=DS_COLUMNS).splits()
    assert {t.task_id for t in again["heldout"]} == {t.task_id for t in parts["heldout"]}


def test_bad_dataset_rows_and_folders_are_one_line(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = _rows()
    rows[3]["hidden_tests"] = [{"inputs": [[1]]}]  # no expected
    _dataset(rows).save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(ConfigError) as e:
        load_environment(str(tmp_path / "bad"), task_columns=DS_COLUMNS)
    assert str(e.value) == (f"{tmp_path / 'bad'}: row 3: hidden_tests[0] needs 'inputs' and 'expected' "
                            "(column 'private')")
    with pytest.raises(ConfigError, match=r"row 0: no column 'title' \(mapped to field 'prompt'"):
        load_environment(str(tmp_path / "bad"), task_columns={**DS_COLUMNS, "prompt": "title"})
    datasets.DatasetDict({"train": _dataset(_rows()), "test": _dataset(_rows())}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ConfigError, match="a DatasetDict with splits train, test: give one split's folder"):
        load_environment(str(tmp_path / "dd"))


BAD = [  # (what to do to the example's rows, the line of the error, what it must name)
    (lambda rows: rows.__setitem__(2, "{not json"), 3, "malformed JSON line"),
    (lambda rows: rows[4].pop("entry_point"), 5, "missing or non-string field 'entry_point'"),
    (lambda rows: rows[6].__setitem__("visible_tests", [{"inputs": 3, "expected": 1}]), 7,
     "visible_tests[0].inputs must be a list of arguments"),
    (lambda rows: rows[1].__setitem__("task_id", rows[0]["task_id"]), 2, "duplicate task_id 'mine/0-sum'"),
    (lambda rows: [r.pop(k) for r in rows[7:8] for k in ("visible_tests", "hidden_tests")], 8, "no tests"),
]


def _evolve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evolve", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("case", range(len(BAD)))
def test_a_bad_line_stops_run_and_eval_with_one_line_naming_file_line_and_field(tmp_path, case):
    break_it, line, needle = BAD[case]
    rows = _rows()
    break_it(rows)
    path = tmp_path / "mine.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    runs = [("run", "--config", "configs/ci.toml", "--suite", str(path), "--db", str(tmp_path / "lineage.db"))]
    if case == 0:  # eval too, once (a cold CLI start is seconds on 2 cores)
        runs.append(("eval", "--policy", "policies/tiny-coder-ci.toml", "--suite", str(path)))
    for args in runs:
        proc = _evolve(*args)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"error: {path}:{line}: ") and needle in lines[0], lines[0]
        assert "Traceback" not in proc.stderr and not proc.stdout.strip()
    assert not (tmp_path / "lineage.db").exists()  # nothing ran: not even the database was made


def test_a_file_that_is_no_environment_is_one_line_not_a_traceback(tmp_path):
    """What used to be `AttributeError: 'NoneType' object has no attribute 'loader'`."""
    (tmp_path / "tasks.txt").write_text("hello\n")
    with pytest.raises(ConfigError, match="neither a .py environment nor a task file"):
        load_environment(str(tmp_path / "tasks.txt"))
    with pytest.raises(ConfigError, match="task file not found: nope.jsonl"):
        load_environment("nope.jsonl")
    with pytest.raises(ConfigError, match="a train and a held-out split need at least 2"):
        load_environment(str(_write(tmp_path / "one.jsonl", _rows()[:1])))


def test_the_docs_table_lists_every_task_field_and_shows_the_example():
    from evolve.verification.tasks import TASK_FIELDS

    page = (REPO / "docs" / "environments.md").read_text()
    rows = [line.split("|")[1].strip().strip("`") for line in page.splitlines() if line.startswith("| `")]
    assert sorted(rows) == sorted(TASK_FIELDS) and len(rows) == len(set(rows))
    assert "docs/examples/tasks.jsonl" in page and "### Your own tasks" in (REPO / "README.md").read_text()
