"""Issue 39 item 4, the verification side: a verifier version applied to a suite's tasks (any subset,
any order; each augmented task must be the one its tests were computed from) and the verdict of a
sample under the tasks' own tests, derived from the augmented run plus a second pass over the failures
of augmented tasks. Real sandbox throughout."""

from __future__ import annotations

import dataclasses
import json

import pytest

from evolve.env.episode import pass_at_k_rows, passed_before_augmentation, verify
from evolve.errors import ConfigError
from evolve.rollout import Rollout
from evolve.util.hashing import content_hash
from evolve.verification import Task, TestCase
from evolve.verification.augment import (
    apply_version,
    augment,
    read_version,
    version_doc,
    versioned_tasks,
    write_version,
)

ABSDIFF = "def absdiff(a, b):\n    if a >= b:\n        return a - b\n    return b - a\n"
# One test, (5, 3): the else branch's mutant (b + a) survives it; the augmentation adds a test that kills it.
WEAK = Task("absdiff", "", "absdiff", hidden_tests=(TestCase((5, 3), 2),), canonical_solution=ABSDIFF)
SQUARE = Task("square", "", "square", hidden_tests=(TestCase((3,), 9),),
              canonical_solution="def square(x):\n    return x * x\n")
# passes WEAK's own test (5 >= 3) and fails an added one (b > a): the false pass a weak test hides
SURVIVOR = "def absdiff(a, b):\n    if a >= b:\n        return a - b\n    return b + a\n"


@pytest.fixture(scope="module")
def version_file(tmp_path_factory, verifier):
    report, augs = augment(verifier, [WEAK, SQUARE], seed=0, inputs=60, max_added=20)
    doc = version_doc(verifier.pipeline, [WEAK, SQUARE], report, augs, source="test", inputs=60, max_added=20,
                      max_mutants=20)
    assert "absdiff" in doc["added"], doc["tasks"]
    return write_version(tmp_path_factory.mktemp("v") / "v.json", doc)


def test_a_version_applies_to_a_suites_tasks_in_any_order_and_refuses_other_tasks(version_file):
    other = Task("other", "", "other", hidden_tests=(TestCase((1,), 1),), canonical_solution="def other(x): return x")
    v = versioned_tasks(version_file, [other, WEAK])  # a split: another order, a task it never saw
    assert set(v.tasks) == {"absdiff"} and v.originals == {"absdiff": WEAK}
    assert v.tasks["absdiff"].hidden_tests[:1] == WEAK.hidden_tests and len(v.tasks["absdiff"].hidden_tests) > 1
    assert v.record["version"] == read_version(version_file)["version"] and v.record["tasks_augmented_here"] == 1
    assert v.record["seed"] == 0 and v.record["source_verifier"] and len(v.record["sha256"]) == 64
    chat = dataclasses.replace(WEAK, meta={"reply_format": "chat"})  # a rendering of the same task: same digest
    assert set(versioned_tasks(version_file, [chat]).tasks) == {"absdiff"}
    changed = dataclasses.replace(WEAK, canonical_solution=ABSDIFF.replace("a - b", "abs(a - b)"))
    with pytest.raises(ConfigError, match="is not the task its tests were computed from"):
        versioned_tasks(version_file, [changed])
    with pytest.raises(ConfigError, match="adds tests to none of these tasks"):
        versioned_tasks(version_file, [other])
    garbage = version_file.parent / "garbage.json"
    garbage.write_text("{not json")
    for bad in (garbage, version_file.parent / "missing.json"):
        with pytest.raises(ConfigError, match="not a readable verifier version"):
            versioned_tasks(bad, [WEAK])


def test_a_version_without_task_digests_still_verifies_but_is_refused_in_the_loop(version_file, tmp_path, verifier):
    doc = json.loads(version_file.read_text())
    digests = doc.pop("task_digests")
    doc["version"] = content_hash({"source": doc["source_verifier"], "added": doc["added"]})  # the first format
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    assert len(apply_version(verifier.pipeline, [WEAK, SQUARE], read_version(old))[0].hidden_tests) > 1
    with pytest.raises(ConfigError, match="written before verifier versions named their tasks' digests"):
        versioned_tasks(old, [WEAK])
    doc["task_digests"] = {"absdiff": "0" * 64}  # digests added by hand: not what the version hash covers
    old.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="do not match its version hash"):
        read_version(old)
    assert digests["absdiff"] != "0" * 64


def _rollouts(task_ids_and_code: list[tuple[str, str]]) -> list[Rollout]:
    return [Rollout(tid, 0, i, "p", "w", [], "", code, purpose="heldout")
            for i, (tid, code) in enumerate(task_ids_and_code)]


def test_the_own_tests_verdict_is_the_augmented_one_plus_a_second_pass_over_failures(version_file, verifier):
    v = versioned_tasks(version_file, [WEAK, SQUARE])
    tasks = {t.task_id: v.tasks.get(t.task_id, t) for t in (WEAK, SQUARE)}
    rolls = _rollouts([("absdiff", ABSDIFF), ("absdiff", SURVIVOR), ("absdiff", "def absdiff(a, b):\n    return 0\n"),
                       ("square", "def square(x):\n    return x + x\n")])
    verify(verifier, tasks, rolls, None)
    assert [r.passed for r in rolls] == [True, False, False, False]  # the survivor fails an added test
    own, again = passed_before_augmentation(verifier, v.originals, rolls)
    assert own == [True, True, False, False], own  # it passes the task's own test
    assert again == 2  # the two failures on the augmented task; square's failure has one verdict
    assert pass_at_k_rows(rolls, (1,), own)["absdiff"]["c"] == 2
    assert passed_before_augmentation(verifier, {}, rolls) == ([r.passed for r in rolls], 0)
