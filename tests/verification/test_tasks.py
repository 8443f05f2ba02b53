"""Task and sample files, HumanEval loading and program assembly."""

from __future__ import annotations

import gzip
import json

import pytest

from evolve.errors import ConfigError
from evolve.verification import Task, assemble_program, load_humaneval, load_samples, load_tasks


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_humaneval_ships_offline():
    tasks = load_humaneval()
    assert len(tasks) == 164 and tasks[0].task_id == "HumanEval/0"
    assert all(t.check_code and t.canonical_solution and t.suite == "humaneval" for t in tasks)


def test_explicit_rows_gz_and_round_trip(tmp_path):
    row = {"task_id": "a", "prompt": "def a(x):\n", "entry_point": "a",
           "visible_tests": [{"inputs": [1], "expected": 1}],
           "hidden_tests": [{"inputs": [[1, 2]], "expected": [1, 2]}, {"inputs": [2.0], "expected": 2.0,
                                                                         "compare": "close", "tol": 0.1}]}
    p = tmp_path / "t.jsonl.gz"
    with gzip.open(p, "wt") as f:
        f.write(json.dumps(row) + "\n")
    (t,) = load_tasks(p)
    assert t.visible_tests[0].inputs == (1,) and t.hidden_tests[1].compare == "close"
    assert Task.from_dict(t.to_dict()) == t


def test_malformed_lines_name_file_and_line(tmp_path):
    p = _write(tmp_path / "t.jsonl", [
        {"task_id": "a", "prompt": "", "entry_point": "a", "hidden_tests": [{"inputs": [], "expected": 1}]},
        "{not json",
        {"task_id": "b", "prompt": "", "entry_point": "not an id", "test": "x"},
        {"task_id": "c", "prompt": "", "entry_point": "c"},
        {"task_id": "a", "prompt": "", "entry_point": "a", "test": "def check(c): pass"},
    ])
    errors: list[str] = []
    tasks = load_tasks(p, errors=errors)
    assert [t.task_id for t in tasks] == ["a"]
    assert [e.split(": ")[0] for e in errors] == [f"{p}:2", f"{p}:3", f"{p}:4", f"{p}:5"]
    assert "duplicate" in errors[-1] and "no tests" in errors[2]
    with pytest.raises(ConfigError, match=f"{p}:2"):
        load_tasks(p)
    with pytest.raises(ConfigError, match="no such file"):
        load_tasks(tmp_path / "missing.jsonl")


def test_samples_completion_or_solution(tmp_path):
    p = _write(tmp_path / "s.jsonl", [{"task_id": "a", "completion": "x"}, {"task_id": "a", "solution": "y"},
                                      {"task_id": "a"}, {"completion": "z"}])
    errors: list[str] = []
    s = load_samples(p, errors=errors)
    assert [(x.completion, x.is_solution, x.line) for x in s] == [("x", False, 1), ("y", True, 2)]
    assert len(errors) == 2 and errors[0].startswith(f"{p}:3")


def test_assemble_program_continuation_full_program_and_fences():
    t = Task("t", "import math\n\ndef helper(x):\n    return x\n\ndef f(x):\n    \"\"\"doc\"\"\"\n", "f",
             hidden_tests=())
    assert assemble_program(t, "    return 1\n") == t.prompt + "    return 1\n"
    full = assemble_program(t, "def f(x):\n    return helper(x)\n")
    assert full.startswith("import math\n") and "def helper" in full and full.count("def f") == 1
    fenced = "Here you go:\n```python\ndef f(x):\n    return 2\n```\nDone."
    out = assemble_program(t, fenced)
    assert "Here you go" not in out and "return 2" in out and "```" not in out
