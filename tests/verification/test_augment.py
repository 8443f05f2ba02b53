"""Issue 39: test augmentation. Generated tests kill the survivors that are not equivalent, the gold
solution still passes, inputs the reference raises on are reported and never become tests, and the
version file carries its provenance and refuses edits and other tasks. Real sandbox throughout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evolve.errors import ConfigError
from evolve.verification import Task, TestCase
from evolve.verification.augment import (
    _greedy,
    apply_version,
    augment,
    read_version,
    version_doc,
    write_version,
)
from evolve.verification.contracts import HUMANEVAL, _prime, admits
from evolve.verification.differential import generated_inputs
from evolve.verification.docexamples import examples, reference_findings
from evolve.verification.inputgen import mutate_inputs, task_rng
from evolve.verification.selfcheck import classify_again, self_check
from evolve.verification.verifier import plan_task

ABSDIFF = "def absdiff(a, b):\n    if a >= b:\n        return a - b\n    return b - a\n"
# One test, (5, 3): the else branch's mutant (b + a) survives it, the swap-cmp one (a > b) is equivalent.
WEAK = Task("absdiff", "", "absdiff", hidden_tests=(TestCase((5, 3), 2),), canonical_solution=ABSDIFF)
# 10 // x raises on 0, which the generated inputs reach (x // 2, 0): reported, never a test.
INV = Task("inv", "", "inv", hidden_tests=(TestCase((5,), 2),),
           canonical_solution="def inv(x):\n    if x > 100:\n        return 0\n    return 10 // x\n")


def test_greedy_keeps_the_fewest_inputs_that_kill_every_killable_survivor():
    assert _greedy([[1, 2], [2, 3], [], [4]], 5) == [2, 4]
    assert _greedy([[1, 2], [2, 3], [], [4]], 1) == [2]
    assert _greedy([[], []], 5) == []


def test_augmented_tests_kill_the_real_survivor_and_the_gold_still_passes(verifier, tmp_path):
    report, augs = augment(verifier, [WEAK, INV], seed=0, inputs=60, max_added=20)
    a, inv = augs
    assert (a.survivors, a.equivalent, a.killed) == (2, 1, 1) and 1 <= len(a.added) <= 2, a
    for t in a.added:  # the expected value is the reference's output, and the input reaches the else branch
        assert t.inputs[1] > t.inputs[0] and t.expected == t.inputs[1] - t.inputs[0], t
    assert inv.reference_raised > 0 and all("ZeroDivisionError" in e for e in inv.raised_examples), inv
    assert inv.added and all(t.inputs != (0,) for t in inv.added), inv.added
    doc = version_doc(verifier.pipeline, [WEAK, INV], report, augs, source="test", inputs=60, max_added=20,
                      max_mutants=20)
    assert doc["seed"] == 0 and doc["source_verifier"] == report.verifier_version and doc["counts"]["survivors_killed"] >= 2
    path = write_version(tmp_path / "v.json", doc)
    new = apply_version(verifier.pipeline, [WEAK, INV], read_version(path))
    assert len(new[0].hidden_tests) == 1 + len(a.added)
    assert all(r.passed for r in verifier.verify_batch([(t, t.canonical_solution) for t in new]))
    after = self_check(verifier, new[:1], max_mutants=50, equiv_inputs=0)
    assert after.tasks[0].killed == 4 and after.tasks[0].survivors == ["swap-cmp@2"], after.tasks[0]
    again = augment(verifier, [WEAK, INV], seed=0, inputs=60, max_added=20)  # seeded: the same tests again
    assert [t.inputs for t in again[1][0].added] == [t.inputs for t in a.added]


def test_a_version_file_refuses_edits_and_other_tasks(verifier, tmp_path):
    report, augs = augment(verifier, [WEAK], seed=1, inputs=40)
    doc = version_doc(verifier.pipeline, [WEAK], report, augs, source="t", inputs=40, max_added=20, max_mutants=20)
    path = write_version(tmp_path / "v.json", doc)
    other = Task("absdiff", "", "absdiff", hidden_tests=(TestCase((5, 3), 2), TestCase((1, 1), 0)),
                 canonical_solution=ABSDIFF)
    with pytest.raises(ConfigError, match="was made from verifier"):
        apply_version(verifier.pipeline, [other], read_version(path))
    edited = json.loads(path.read_text())
    edited["added"]["absdiff"][0]["expected"] = "0"
    path.write_text(json.dumps(edited))
    with pytest.raises(ConfigError, match="do not match its version hash"):
        read_version(path)


def test_the_augment_command_writes_a_version_that_verify_uses(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "absdiff", "prompt": "", "entry_point": "absdiff", "canonical_solution":
                                 ABSDIFF, "hidden_tests": [{"inputs": [5, 3], "expected": 2}]}) + "\n")
    evolve = [sys.executable, "-m", "evolve"]
    out = tmp_path / "v.json"
    p = subprocess.run([*evolve, "augment", "--tasks", str(tasks), "--out", str(out), "--inputs", "40"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "survivors: 2 (1 probably equivalent), killed by the added tests: 1" in p.stdout, p.stdout
    p = subprocess.run([*evolve, "verify", "--tasks", str(tasks), "--augmented", str(out), "--self-check"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "mutation score over non-equivalent mutants: 1.000" in p.stdout, p.stdout
    Path(out).write_text("{}")
    p = subprocess.run([*evolve, "verify", "--tasks", str(tasks), "--augmented", str(out), "--self-check"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "not a verifier version file" in p.stderr and "Traceback" not in p.stderr, p.stderr


DOC = '''def f(xs, k):
    """Examples, in HumanEval's styles:
    >>> f([1, 2], 1)
    [2, 3]
    >>> f([], 5) == []
    f([0], 2) => [2]
    f([1], 1) ==> [5]
    f([3], 0) ➞ [3]
    f(x, 1) = [1]
    f([1], "a") = [2]
    """
'''


def test_the_reference_is_checked_against_its_docstring_examples(verifier):
    t = Task("doc", DOC, "f", hidden_tests=(TestCase(([1], 1), [2]),),
             canonical_solution="    return [x + k for x in xs]\n")
    ex, skipped = examples(t)
    assert ex == [(([1, 2], 1), [2, 3]), (([], 5), []), (([0], 2), [2]), (([1], 1), [5]), (([3], 0), [3]),
                  (([1], "a"), [2])] and skipped == 1, (ex, skipped)  # f(x, 1): not a literal call
    findings, counts = reference_findings(verifier, [t])
    assert [(f.call, f.docstring) for f in findings] == [("f([1], 1)", "[5]"), ("f([1], 'a')", "[2]")], findings
    assert findings[0].reference == "[2]" and findings[1].reference.startswith("raised TypeError"), findings
    assert counts == {"tasks_with_examples": 1, "examples": 6, "unparsed_example_lines": 1, "findings": 2}


def test_classify_again_reuses_the_verdicts_on_another_seeds_inputs(verifier):
    report = self_check(verifier, [WEAK], max_mutants=50, equiv_inputs=30, seed=3)
    again = classify_again(verifier, [WEAK], report, 30, 4)
    a, b = report.tasks[0], again.tasks[0]
    assert (b.mutants, b.killed, b.survivors) == (a.mutants, a.killed, a.survivors) and again.seed == 4
    assert b.equivalent == ["swap-cmp@2"] and b.equivalent_ids == a.equivalent_ids == [a.survivor_ids[0]]
    assert b.generated != a.generated and len(b.generated) == 30  # other inputs, the same conclusion


def test_contracts_admit_every_task_input_and_drop_generated_ones_that_break_them(verifier, humaneval):
    by_id = {t.task_id: t for t in humaneval}
    for tid, contract in HUMANEVAL.items():  # a contract its own task's tests break is a wrong contract
        calls = plan_task(by_id[tid]).calls
        assert calls and all(admits(contract, a) for a in calls), tid
    t = by_id["HumanEval/59"]  # "Assume n > 1 and is not a prime"
    plain = mutate_inputs(list(plan_task(t).calls), 100, task_rng(0, t.task_id))
    assert any(n <= 1 or _prime(n) for (n,) in plain)  # the mutation alone makes such inputs
    kept = generated_inputs(verifier, t, 100, 0)
    assert len(kept) >= 50 and all(n > 1 and not _prime(n) for (n,) in kept), kept
    assert admits(None, (1,)) and not admits(HUMANEVAL["HumanEval/20"], ("not a list", 3))


def test_humaneval_20_inputs_with_a_tied_closest_pair_are_not_tests():
    # a real Qwen sample returned (0, 1) on [1, 2, 3, 4, 5, 0], as right as the reference's (1, 2)
    # (benchmarks/results/humaneval_grading.json, false_pass): a tie is no evidence either way
    from evolve.verification.contracts import HUMANEVAL

    admits = HUMANEVAL["HumanEval/20"]
    assert not admits([1.0, 2.0, 3.0, 4.0, 5.0, 0.0])
    assert not admits([0.5, 1.5, 2.5])  # two pairs (0.5, 1.5) and (1.5, 2.5) at distance 1.0
    assert admits([1.0, 2.0, 3.9, 4.0, 5.0, 2.2]) and admits([2.0, 2.0, 2.0])  # one pair by value
