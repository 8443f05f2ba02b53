"""`evolve verify` as a user runs it: a real subprocess of the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EVOLVE = str(Path(sys.executable).with_name("evolve"))
TASKS = [
    {"task_id": "add", "prompt": "def add(a, b):\n", "entry_point": "add",
     "visible_tests": [{"inputs": [1, 2], "expected": 3}], "hidden_tests": [{"inputs": [-1, 5], "expected": 4}],
     "canonical_solution": "    return a + b\n"},
    {"task_id": "sub", "prompt": "def sub(a, b):\n", "entry_point": "sub",
     "hidden_tests": [{"inputs": [3, 1], "expected": 2}, {"inputs": [0, 0], "expected": 0}],
     "canonical_solution": "    return a + b\n"},  # a wrong gold: self-check must list it
]


def _run(*args, timeout=120):
    return subprocess.run([EVOLVE, "verify", *args], capture_output=True, text=True, timeout=timeout)


def _files(tmp_path, samples):
    t = tmp_path / "tasks.jsonl"
    t.write_text("".join(json.dumps(r) + "\n" for r in TASKS))
    s = tmp_path / "samples.jsonl"
    s.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in samples))
    return t, s


def test_verify_final_line_malformed_lines_and_out_file(tmp_path):
    t, s = _files(tmp_path, [
        {"task_id": "add", "completion": "    return a + b\n"},
        "{this is not json",
        {"task_id": "add", "completion": "    return a * b\n"},
        {"task_id": "add", "solution": "```python\ndef add(a, b):\n    return b + a\n```"},
        {"task_id": "nope", "completion": "x"},
    ])
    out = tmp_path / "results.jsonl"
    p = _run("--tasks", str(t), "--samples", str(s), "--out", str(out))
    assert p.stdout.strip().splitlines()[-1] == "2 passed, 3 failed"
    assert p.returncode == 1
    assert f"{s}:2: malformed JSON line" in p.stderr and f"{s}:5: unknown task_id 'nope'" in p.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["sample_line"] for r in rows] == [1, 3, 4, 5]
    assert rows[1]["error_class"] == "WrongAnswer" and rows[0]["passed"] and rows[2]["passed"]
    assert {"stages", "reward", "trace", "hack_flags", "duration_s"} <= set(rows[0])


def test_verify_json_and_hack_flags(tmp_path):
    t, s = _files(tmp_path, [{"task_id": "add", "completion": "    import sys\n    sys.exit(0)\n"}])
    p = _run("--tasks", str(t), "--samples", str(s), "--json", "--jobs", "1")
    lines = p.stdout.strip().splitlines()
    assert lines[-1] == "0 passed, 1 failed"
    assert "hack: sys-exit" in json.loads(lines[0])["hack_flags"]


def test_missing_file_and_bad_pipeline_are_one_line_errors(tmp_path):
    p = _run("--tasks", str(tmp_path / "nope.jsonl"), "--samples", str(tmp_path / "s.jsonl"))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "no such file" in p.stderr
    t, s = _files(tmp_path, [])
    bad = tmp_path / "bad.toml"
    bad.write_text('policy = "sometimes"\n[[stages]]\nname = "hidden"\n')
    p = _run("--tasks", str(t), "--samples", str(s), "--pipeline", str(bad))
    assert p.returncode == 2 and "policy: " in p.stderr and "Traceback" not in p.stderr


def test_self_check_lists_failing_gold_and_mutation_score(tmp_path):
    t, _ = _files(tmp_path, [])
    p = _run("--tasks", str(t), "--self-check", "--max-mutants", "8")
    assert p.returncode == 1, p.stderr
    assert "gold solutions that fail (1):" in p.stdout and "  sub:" in p.stdout
    assert "mutation score:" in p.stdout
    assert p.stdout.strip().splitlines()[-1] == "1 passed, 1 failed"
    assert "probably equivalent (agree with the gold on every one of up to 100 generated inputs, seed 0)" in p.stdout
    assert "mutation score over non-equivalent mutants:" in p.stdout and "verifier version: " in p.stdout
    p = _run("--tasks", str(t), "--self-check", "--json", "--equiv-inputs", "5", "--seed", "2")
    row = json.loads(p.stdout.splitlines()[0])
    assert row["task_id"] == "add" and row["probably_equivalent"] == [] and "score_non_equivalent" in row, row


def test_a_bad_pipeline_file_is_one_line_naming_file_and_key(tmp_path):
    """Through the real entry point: an unknown key, a bad type and a bad value each stop before any
    sample runs, with exit 2, one stderr line naming the file and the key, and no traceback."""
    t, s = _files(tmp_path, [{"task_id": "add", "completion": "    return a + b\n"}])
    cases = {"unknown": ('[[stages]]\nname = "hidden"\nrequird = false\n', "unknown key 'stages.0.requird'"),
             "type": ('[limits]\ncpu_s = "2"\n[[stages]]\nname = "hidden"\n', "limits.cpu_s: Input should be"),
             "value": ('policy = "first"\n[[stages]]\nname = "hidden"\n', "policy: Input should be")}
    for name, (text, needle) in cases.items():
        bad = tmp_path / f"{name}.toml"
        bad.write_text(text)
        p = _run("--tasks", str(t), "--samples", str(s), "--pipeline", str(bad))
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, (name, p.stderr)
        assert lines[0].startswith(f"error: {bad}: ") and needle in lines[0], (name, lines[0])
        assert "passed" not in p.stdout, name
