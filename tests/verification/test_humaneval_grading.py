"""Issue 37 item 2 / issue 39: the HumanEval grading benchmark's arithmetic and its use of `evolve verify`.
pass@1 is a mean over tasks (the 41 cut out of a 164-task run when no held-out run exists), a false pass is
a sample the original tests pass and the augmented ones reject, and the verdicts come from the real CLI
through a real sandbox, one per sample line in order."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("humaneval_grading_bench", REPO / "benchmarks" / "humaneval_grading.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(task: str, ok: bool, split: str = "all", model: str = "0.5b", mode: str = "greedy", sample: int = 0):
    verdicts = {g: ok for g in ("strict", "humaneval", "harness", "augmented")}
    return {"task_id": task, "model": model, "mode": mode, "split": split, "sample": sample,
            "finish_reason": "stop", **verdicts}


def test_pass_at_1_is_a_mean_over_tasks_and_the_41_are_cut_from_the_164():
    bench = _bench()
    rows = [_row("HumanEval/0", True), _row("HumanEval/1", False), _row("HumanEval/2", True)]
    # task 1: 1 of 4 samples passes; task 2: 2 of 2 -> (0.25 + 1) / 2, not 3 / 6
    rows += [_row("HumanEval/1", i == 0, "heldout", mode="loop", sample=i) for i in range(4)]
    rows += [_row("HumanEval/2", True, "heldout", mode="loop", sample=i) for i in range(2)]
    rows[0]["strict"] = False  # a strict-only failure shows in that grader's column only
    table = bench.rates(rows, heldout={"HumanEval/1", "HumanEval/2"})
    assert table["0.5b/greedy/164"]["humaneval"] == round(2 / 3, 4)
    assert table["0.5b/greedy/164"]["strict"] == round(1 / 3, 4)
    cut = table["0.5b/greedy/41"]
    assert (cut["tasks"], cut["samples"], cut["humaneval"]) == (2, 2, 0.5)
    assert table["0.5b/loop/41"]["humaneval"] == 0.625 and table["0.5b/loop/41"]["samples"] == 6


def test_false_passes_are_original_passes_the_added_tests_reject():
    bench = _bench()
    rows = [dict(_row("HumanEval/0", True), original_cli=True),
            dict(_row("HumanEval/1", True), original_cli=True, augmented=False),
            dict(_row("HumanEval/2", False), original_cli=False, augmented=False),  # failed already: not a false pass
            dict(_row("HumanEval/3", True, model="1.5b"), original_cli=True)]
    fp = bench.false_passes(rows)
    assert (fp["samples_passing_original"], fp["rejected_by_augmented"], fp["share"]) == (3, 1, round(1 / 3, 4))
    assert fp["per_model"]["0.5b"] == {"pass_original": 2, "rejected_by_augmented": 1, "share": 0.5}
    assert [r["task_id"] for r in fp["rejected"]] == ["HumanEval/1"]


def test_cli_verdicts_run_evolve_verify_and_keep_the_sample_order():
    bench = _bench()
    right = "def has_close_elements(numbers, threshold):\n    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"
    wrong = "def has_close_elements(numbers, threshold):\n    return False\n"
    rows = [{"task_id": "HumanEval/0", "completion": c} for c in (wrong, right, right)]
    assert [ok for ok, _trace in bench.cli_verdicts(rows, None)] == [False, True, True]


def test_a_new_machine_gets_the_record_files_back_from_the_committed_samples_file(tmp_path):
    """The grading's records live in runs/ (not kept); the results' samples file brings them back, one file
    per (model, mode, split) under humaneval_sample.py's name, each read back as the row it was, and a file
    already there is left alone (a later sampling job adds to it)."""
    import gzip
    import json

    bench = _bench()
    pattern = str(tmp_path / "records" / "*.jsonl")
    (tmp_path / "records").mkdir()
    kept = tmp_path / "records" / "qwen0.5b-greedy-long-all.jsonl"
    kept.write_text('{"task_id": "HumanEval/0"}\n')
    written = bench.restore_records(pattern)
    assert "qwen0.5b-greedy-long-all.jsonl" not in written and kept.read_text() == '{"task_id": "HumanEval/0"}\n'
    kept.unlink()
    assert "qwen0.5b-greedy-long-all.jsonl" in bench.restore_records(pattern)
    with gzip.open(REPO / "benchmarks" / "results" / "humaneval_grading_samples.jsonl.gz", "rt") as f:
        committed = [json.loads(x) for x in f]
    back = bench.read_records(pattern)
    key = ("model", "mode", "split", "task_id", "sample")
    assert len(back) == len(committed) > 0
    assert sorted((tuple(r[k] for k in key), r["text"], r["finish_reason"]) for r in back) == \
        sorted((tuple(r[k] for k in key), r["text"], r["finish_reason"]) for r in committed)
    assert bench.restore_records(pattern) == []  # nothing written twice


def test_maker_replies_are_graded_after_evalplus_sanitizing_as_the_makers_harness_does():
    """EvalPlus keeps imports and what the entry point reaches; a model's own wrong assert, print or
    __main__ block is dropped, so the reply fails or passes on HumanEval's tests alone."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from evalplus_sanitize import sanitize

    bench = _bench()
    reply = ("import math\nTOL = 0.0\n\ndef gap(a, b):\n    return abs(a - b)\n\n"
             "def has_close_elements(numbers, threshold):\n"
             "    return any(gap(a, b) < threshold + TOL for i, a in enumerate(numbers) for b in numbers[i + 1:])\n\n"
             "def unused():\n    return math.pi\n\n"
             "assert has_close_elements([1.0, 2.0], 0.5) is True  # the model's own wrong test\n"
             "print(has_close_elements([1.0], 1.0))\n"
             "if __name__ == '__main__':\n    raise SystemExit(1)\n")
    clean = sanitize(reply, "has_close_elements")
    assert "assert" not in clean and "print" not in clean and "__main__" not in clean and "unused" not in clean
    assert "import math" in clean and "TOL = 0.0" in clean and "def gap" in clean
    assert sanitize("def f(:\n", "f") == "def f(:\n" and sanitize("x = 1\n", "f") == "x = 1\n"
    rows = [{"task_id": "HumanEval/0", "completion": c} for c in (reply, clean)]
    assert [ok for ok, _ in bench.cli_verdicts(rows, None)] == [False, True]
