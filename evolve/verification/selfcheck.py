"""Verifier self-check: every gold solution must pass; mutants of it should be killed by the tests.

The mutation score of a task is the fraction of its mutants that fail verification: a task whose
tests let many mutants through is a weak verifier, and the loop can learn to exploit it.

Some survivors are equivalent to the gold solution (``x + 0`` for ``x``), and no test can kill
them. A survivor that agrees with the gold solution on every generated input (type-aware mutations
of the task's own test inputs, run in the sandbox, compared in the parent: evolve.verification.
differential) is reported as *probably equivalent*; the score over the other mutants is reported
beside the score over all. A survivor of a task with no usable generated input stays a survivor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from evolve.util.hashing import content_hash
from evolve.verification.differential import disagreements, generated_inputs, oracle_for, run_outputs, usable
from evolve.verification.mutants import mutants
from evolve.verification.pipeline_types import Pipeline
from evolve.verification.sandbox.codec import encode
from evolve.verification.tasks import assemble_program
from evolve.verification.types import Task
from evolve.verification.verifier import Verifier

EQUIV_INPUTS = 100  # generated inputs per task with survivors (the self-check's default)


@dataclass
class TaskCheck:
    task_id: str
    gold_passed: bool
    gold_trace: str = ""
    mutants: int = 0
    killed: int = 0
    weak: bool = False
    survivors: list[str] = field(default_factory=list)  # "operator@line" of mutants that passed
    equivalent: list[str] = field(default_factory=list)  # survivors that agree with the gold on every input
    inputs: int = 0  # generated inputs on which the gold returned a plain value (0: none, or not tried)
    # The evidence behind ``equivalent``, for test augmentation (not part of the printed report):
    generated: list[tuple] = field(default_factory=list, repr=False)  # the generated argument tuples
    reference: list = field(default_factory=list, repr=False)  # the gold's Outcome on each
    kills: list[list[int]] = field(default_factory=list, repr=False)  # per survivor: inputs it disagrees on
    survivor_ids: list[int] = field(default_factory=list, repr=False)  # each survivor's place among the mutants
    equivalent_ids: list[int] = field(default_factory=list, repr=False)  # the same, of the probably equivalent
    sources: list[str] = field(default_factory=list, repr=False)  # each survivor's program

    @property
    def mutation_score(self) -> float | None:
        return self.killed / self.mutants if self.mutants else None

    @property
    def non_equivalent(self) -> int:
        return self.mutants - len(self.equivalent)

    @property
    def score_non_equivalent(self) -> float | None:
        """Killed over the mutants not shown probably equivalent."""
        return self.killed / self.non_equivalent if self.non_equivalent else None


@dataclass
class SelfCheckReport:
    tasks: list[TaskCheck]
    seed: int = 0
    equiv_inputs: int = 0  # generated inputs asked for per task (0: equivalence not checked)
    verifier_version: str = ""  # content hash of the pipeline and the tasks checked

    @property
    def gold_failures(self) -> list[TaskCheck]:
        return [t for t in self.tasks if not t.gold_passed]

    @property
    def mutation_score(self) -> float | None:
        n = sum(t.mutants for t in self.tasks)
        return sum(t.killed for t in self.tasks) / n if n else None

    @property
    def equivalent(self) -> int:
        return sum(len(t.equivalent) for t in self.tasks)

    @property
    def score_non_equivalent(self) -> float | None:
        n = sum(t.non_equivalent for t in self.tasks)
        return sum(t.killed for t in self.tasks) / n if n else None


def _solution_lines(task: Task, program: str) -> range | None:
    """Line numbers of the gold solution inside the assembled program (the prompt is not mutated)."""
    if program.startswith(task.prompt):
        start = task.prompt.count("\n") + 1
        return range(start, program.count("\n") + 2)
    return None


def verifier_version(pipe: Pipeline, tasks: list[Task]) -> str:
    """What a verdict depends on: the pipeline (stages, limits, comparison) and every task's tests. Tests
    are hashed in the sandbox codec's tagged JSON: a tuple is not a list, and a dict may mix key types."""
    return content_hash({"pipeline": repr((pipe.stages, pipe.policy, pipe.partial_credit, pipe.strict_types,
                                           pipe.limits)),
                         "tasks": [_fingerprint(t) for t in tasks]})


def task_digest(t: Task) -> str:
    """What a task's verdicts depend on (prompt, entry point, check, reference and tests), as one hash;
    its rendering (``meta``) is left out, so a chat suite's copy of a task has the same digest."""
    return content_hash(_fingerprint(t))


def _fingerprint(t: Task) -> list:
    tests = [[encode(tuple(c.inputs), 1 << 26), encode(c.expected, 1 << 26), c.compare, c.tol]
             for c in t.visible_tests + t.hidden_tests]
    return [t.task_id, t.prompt, t.entry_point, t.check_code, t.canonical_solution, tests]


def self_check(verifier: Verifier, tasks: list[Task], max_mutants: int = 20, equiv_inputs: int = EQUIV_INPUTS,
               seed: int = 0) -> SelfCheckReport:
    """Run each task's gold solution and up to ``max_mutants`` mutants of it, in batches; then classify
    the survivors on ``equiv_inputs`` generated inputs a task (0: not at all)."""
    with_gold = [t for t in tasks if t.canonical_solution is not None]
    gold = verifier.verify_batch([(t, t.canonical_solution) for t in with_gold])
    checks = {t.task_id: TaskCheck(t.task_id, r.passed, "" if r.passed else r.trace, weak=r.weak_verification)
              for t, r in zip(with_gold, gold, strict=True)}
    for t in tasks:
        if t.canonical_solution is None:
            checks[t.task_id] = TaskCheck(t.task_id, False, "no canonical_solution")
    pairs, owners = [], []
    for t in with_gold:
        if not checks[t.task_id].gold_passed:
            continue
        program = assemble_program(t, t.canonical_solution)
        for m in mutants(program, limit=max_mutants, only_lines=_solution_lines(t, program)):
            # The mutant is a full program: pass it as a "solution" that defines the entry point.
            pairs.append((t, m.source))
            owners.append((t, f"{m.operator}@{m.line}", m.source))
    alive: dict[str, list[tuple[str, str]]] = {}
    for (t, label, src), r in zip(owners, verifier.verify_batch(pairs), strict=True):
        c = checks[t.task_id]
        c.mutants += 1
        if r.passed:
            c.survivors.append(label)
            c.survivor_ids.append(c.mutants - 1)
            c.sources.append(src)
            alive.setdefault(t.task_id, []).append((label, src))
        else:
            c.killed += 1
    if equiv_inputs > 0 and alive:
        _classify(verifier, [t for t in with_gold if t.task_id in alive], alive, checks, equiv_inputs, seed)
    return SelfCheckReport([checks[t.task_id] for t in tasks], seed, equiv_inputs, verifier_version(verifier.pipeline, tasks))


def _classify(verifier: Verifier, tasks: list[Task], alive: dict[str, list[tuple[str, str]]],
              checks: dict[str, TaskCheck], n: int, seed: int) -> None:
    """Gold and each survivor on the task's generated inputs, in one batch; a survivor that agrees with
    the gold wherever the gold returned a plain value is probably equivalent."""
    items, owners = [], []
    for t in tasks:
        calls = generated_inputs(verifier, t, n, seed)
        if not calls:
            continue
        owners.append((t, len(items)))
        items.append((t, t.canonical_solution, calls))
        items += [(t, src, calls) for _, src in alive[t.task_id]]
    outs = run_outputs(verifier, items)
    strict = verifier.pipeline.strict_types
    for t, at in owners:
        ref, keep = outs[at], usable(outs[at])
        c = checks[t.task_id]
        c.inputs, c.generated, c.reference = len(keep), items[at][2], ref
        oracle = oracle_for(verifier, t)
        for k, (label, _) in enumerate(alive[t.task_id]):
            c.kills.append(disagreements(oracle, strict, ref, outs[at + 1 + k], keep) if keep else [])
            if keep and not c.kills[-1]:
                c.equivalent.append(label)
                c.equivalent_ids.append(c.survivor_ids[k])


def classify_again(verifier: Verifier, tasks: list[Task], report: SelfCheckReport, n: int,
                   seed: int) -> SelfCheckReport:
    """The same mutants and verdicts, their survivors classified on another ``seed``'s inputs (no mutant
    is verified again): an independent look at which survivors are equivalent."""
    checks = {c.task_id: dataclasses.replace(c, equivalent=[], inputs=0, generated=[], reference=[], kills=[],
                                             equivalent_ids=[]) for c in report.tasks}
    alive = {c.task_id: list(zip(c.survivors, c.sources, strict=True)) for c in report.tasks if c.survivors}
    _classify(verifier, [t for t in tasks if t.task_id in alive], alive, checks, n, seed)
    return SelfCheckReport([checks[c.task_id] for c in report.tasks], seed, n, report.verifier_version)
