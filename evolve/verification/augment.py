"""Test augmentation: a new verifier version whose tests kill the mutants the original tests let through.

For each task with surviving mutants (``selfcheck.self_check``), the survivors and the gold solution
run on the task's generated inputs (``inputgen``, seeded); an input on which a survivor disagrees
with the gold becomes a candidate test, its expected value the gold's output there (computed in the
sandbox, decoded here). A greedy set cover keeps the fewest inputs that kill every killable survivor,
at most ``max_added`` a task. Inputs on which the reference raises are never tests: they are reported
(they break the task's preconditions, or show a reference bug), as are the reference's disagreements
with its own docstring examples (``docexamples.reference_findings``).

Not augmented: tasks whose check is recorded and replayed (its asserts are not plain comparisons of a
result, e.g. HumanEval/32 checks that a root is a root, so the gold's output is not the only right one).

The version file (JSON, ``FORMAT``) holds the added tests in the sandbox codec's tagged JSON (a tuple
stays a tuple), the source verifier's version hash, each augmented task's digest (``task_digests``:
what its tests were computed from), the seed and the counts; its ``version`` hashes the tests and the
digests. ``apply_version`` turns it into tasks for ``Verifier`` and refuses a file made from other
tasks or another pipeline (`evolve verify --augmented`); ``versioned_tasks`` applies it to any subset
of a suite's tasks in any order, task by task (the loop's splits, `evolve eval`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from evolve.errors import ConfigError
from evolve.util.atomic import atomic_write_text
from evolve.util.hashing import content_hash, sha256_file
from evolve.util.text import one_line
from evolve.verification.differential import oracle_for
from evolve.verification.pipeline_types import Pipeline
from evolve.verification.sandbox.codec import decode, encode
from evolve.verification.sandbox_output import loaded
from evolve.verification.selfcheck import (
    SelfCheckReport,
    TaskCheck,
    self_check,
    task_digest,
    verifier_version,
)
from evolve.verification.stages.base import call_repr
from evolve.verification.types import Task, TestCase
from evolve.verification.verifier import Verifier, plan_task

FORMAT = "evolve-verifier-augment/1"
MAX_REPORTED = 5  # reference errors listed per task (all are counted)


@dataclass
class TaskAugment:
    task_id: str
    added: list[TestCase] = field(default_factory=list)
    survivors: int = 0  # mutants the original tests let through
    equivalent: int = 0  # of which probably equivalent
    killed: int = 0  # survivors an added test kills
    reference_raised: int = 0  # generated inputs the reference raised on (never tests)
    raised_examples: list[str] = field(default_factory=list)  # "f(args): Error: message", up to MAX_REPORTED
    skipped: str = ""  # why the task was not augmented


def _greedy(kills: list[list[int]], cap: int) -> list[int]:
    """Fewest inputs covering every survivor with a killing input (ties: the earliest input)."""
    left = [set(k) for k in kills if k]
    chosen: list[int] = []
    while left and len(chosen) < cap:
        counts: dict[int, int] = {}
        for s in left:
            for i in s:
                counts[i] = counts.get(i, 0) + 1
        best = min(counts, key=lambda i: (-counts[i], i))
        chosen.append(best)
        left = [s for s in left if best not in s]
    return sorted(chosen)


def _test(call: tuple, value, compare: str, tol: float) -> TestCase:
    if compare == "eq" and type(value) is float:  # a float result: another correct order of operations may
        return TestCase(call, value, "isclose", 0.0)  # differ in the last bits (math.isclose, rel 1e-9)
    return TestCase(call, value, compare, tol)


def _augment_task(verifier: Verifier, task: Task, c: TaskCheck, max_added: int) -> TaskAugment:
    out = TaskAugment(task.task_id, survivors=len(c.survivors), equivalent=len(c.equivalent))
    for call, o in zip(c.generated, c.reference, strict=False):
        if o.status == "err":
            out.reference_raised += 1
            if len(out.raised_examples) < MAX_REPORTED:
                out.raised_examples.append(f"{call_repr(task.entry_point, call)}: {o.error[0]}: {o.error[1]}"[:300])
    if not c.survivors:
        return out
    if verifier.plan(task).check:
        out.skipped = "its check is recorded and replayed (not plain comparisons): not augmented"
        return out
    kills = c.kills or [[] for _ in c.survivors]
    oracle, chosen = oracle_for(verifier, task), _greedy(kills, max_added)
    for k in chosen:
        out.added.append(_test(c.generated[k], loaded(c.reference[k]).value, oracle.compare, oracle.tol))
    out.killed = sum(1 for k in kills if set(chosen) & set(k))
    return out


def augment(verifier: Verifier, tasks: list[Task], seed: int = 0, inputs: int = 100, max_added: int = 20,
            max_mutants: int = 20) -> tuple[SelfCheckReport, list[TaskAugment]]:
    """The self-check of ``tasks`` (survivors classified on ``inputs`` generated inputs a task), and per
    task the tests that kill its non-equivalent survivors."""
    report = self_check(verifier, tasks, max_mutants=max_mutants, equiv_inputs=inputs, seed=seed)
    by_id = {t.task_id: t for t in tasks}
    return report, [_augment_task(verifier, by_id[c.task_id], c, max_added) for c in report.tasks
                    if c.gold_passed]


def version_doc(pipe: Pipeline, tasks: list[Task], report: SelfCheckReport, augments: list[TaskAugment], *,
                source: str, inputs: int, max_added: int, max_mutants: int, findings: list | None = None) -> dict:
    """The version file's content: provenance, counts, the added tests (tagged JSON) and the reference's
    disagreements with its docstrings (``docexamples.Finding``; reported, never tests)."""
    added = {a.task_id: [{"inputs": encode(tuple(t.inputs), 1 << 22), "expected": encode(t.expected, 1 << 22),
                          "compare": t.compare, "tol": t.tol} for t in a.added] for a in augments if a.added}
    per_task = {a.task_id: {"survivors": a.survivors, "probably_equivalent": a.equivalent, "killed": a.killed,
                            "added": len(a.added), "reference_raised": a.reference_raised,
                            "raised_examples": a.raised_examples, "skipped": a.skipped}
                for a in augments if a.survivors or a.reference_raised}
    n_added = sum(len(a.added) for a in augments)
    by_id = {t.task_id: t for t in tasks}
    digests = {tid: task_digest(by_id[tid]) for tid in added}  # what each task's tests were computed from
    counts = {"tasks": len(tasks), "tasks_augmented": len(added), "tests_added": n_added,
              "tests_added_per_task": round(n_added / len(tasks), 3) if tasks else 0.0,
              "mutants": sum(c.mutants for c in report.tasks), "survivors": sum(a.survivors for a in augments),
              "probably_equivalent": sum(a.equivalent for a in augments),
              "survivors_killed": sum(a.killed for a in augments),
              "reference_raised": sum(a.reference_raised for a in augments)}
    return {"format": FORMAT, "version": _version_hash(report.verifier_version, added, digests),
            "source_verifier": report.verifier_version, "task_digests": digests, "source": source,
            "pipeline": pipe.name,
            "seed": report.seed, "inputs_per_task": inputs, "max_added": max_added, "max_mutants": max_mutants,
            "counts": counts, "tasks": per_task, "added": added,
            "reference_findings": [dataclasses.asdict(f) for f in findings or ()]}


def _version_hash(source_verifier, added, digests=None) -> str:
    """The version's id: a hash over the tests it adds and what they were computed from (a file written
    before per-task digests existed hashes without them)."""
    body = {"source": source_verifier, "added": added}
    return content_hash(body if digests is None else {**body, "task_digests": digests})


def write_version(path: Path, doc: dict) -> Path:
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def read_version(path: Path) -> dict:
    """A version file, checked: format, and its hash over what it adds (a hand-edited file is refused)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: not a readable verifier version ({str(e)[:80]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("added"), dict):
        raise ConfigError(f"{path}: not a verifier version file (format {FORMAT!r})")
    if _version_hash(doc.get("source_verifier"), doc["added"], doc.get("task_digests")) != doc.get("version"):
        raise ConfigError(f"{path}: its tests do not match its version hash (edited after it was written?)")
    return doc


def apply_version(pipe: Pipeline, tasks: list[Task], doc: dict) -> list[Task]:
    """``tasks`` with the version's tests added to their hidden tests (a HumanEval check becomes its
    rewritten tests plus the added ones). Refused unless the tasks and pipeline are the ones it was made from."""
    here = verifier_version(pipe, tasks)
    if here != doc.get("source_verifier"):
        raise ConfigError(f"the verifier version was made from verifier {str(doc.get('source_verifier'))[:12]}, "
                          f"these tasks and pipeline are {here[:12]}")
    return [_with_added(t, doc["added"][t.task_id]) if doc["added"].get(t.task_id) else t for t in tasks]


def _with_added(t: Task, extra: list) -> Task:
    """The task with ``extra`` (the version's tagged-JSON tests) after its own hidden tests: the original
    tests stay first, so a verdict on them is a verdict on a prefix of the calls."""
    try:
        added = tuple(TestCase(decode(e["inputs"], 1 << 22), decode(e["expected"], 1 << 22), e["compare"],
                               float(e["tol"])) for e in extra)
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"verifier version: task {t.task_id}: a malformed test ({e})") from None
    return dataclasses.replace(t, hidden_tests=plan_task(t).hidden + added)


@dataclass
class VersionedTasks:
    """A verifier version applied to some of a suite's tasks (the loop and `evolve eval`)."""

    record: dict  # what a run records: the file, the version's hash and its provenance
    tasks: dict[str, Task]  # task id -> the task with the added tests (only the tasks it augments)
    originals: dict[str, Task]  # task id -> the same task as it was (its own tests only)


def version_record(doc: dict, path: Path) -> dict:
    """A version's identity and provenance, as a run config records it."""
    counts = doc.get("counts") or {}
    return {"path": str(path), "version": doc["version"], "sha256": sha256_file(Path(path)),
            "source_verifier": doc.get("source_verifier"), "source": doc.get("source"),
            "pipeline": doc.get("pipeline"), "seed": doc.get("seed"), "inputs_per_task": doc.get("inputs_per_task"),
            "max_added": doc.get("max_added"), "max_mutants": doc.get("max_mutants"),
            "tests_added": counts.get("tests_added"), "tasks_augmented": counts.get("tasks_augmented")}


def versioned_tasks(path: Path, tasks: list[Task]) -> VersionedTasks:
    """The version file at ``path`` applied to those of ``tasks`` it adds tests to. Unlike ``apply_version``
    the tasks may be any subset or order (a suite's splits): each augmented task must have the digest its
    tests were computed from (``task_digest``); the pipeline may differ (the expected values are the
    reference's outputs, whatever judges them). One line (ConfigError) on a bad, edited or foreign file."""
    doc = read_version(path)
    digests = doc.get("task_digests")
    if not isinstance(digests, dict):
        raise ConfigError(f"{path}: written before verifier versions named their tasks' digests; "
                          "write it again with `evolve augment`")
    out, originals = {}, {}
    for t in tasks:
        extra = doc["added"].get(t.task_id)
        if not extra:
            continue
        if digests.get(t.task_id) != task_digest(t):
            raise ConfigError(f"{path}: task {one_line(t.task_id, 80)} is not the task its tests were computed "
                              "from (its prompt, reference or tests differ)")
        out[t.task_id], originals[t.task_id] = _with_added(t, extra), t
    if not out:
        raise ConfigError(f"{path}: adds tests to none of these tasks (it was made from {doc.get('source')!r})")
    return VersionedTasks({**version_record(doc, path), "tasks_augmented_here": len(out)}, out, originals)
