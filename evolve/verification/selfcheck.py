"""Verifier self-check: every gold solution must pass; mutants of it should be killed by the tests.

The mutation score of a task is the fraction of its mutants that fail verification: a task whose
tests let many mutants through is a weak verifier, and the loop can learn to exploit it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evolve.verification.mutants import mutants
from evolve.verification.tasks import assemble_program
from evolve.verification.types import Task
from evolve.verification.verifier import Verifier


@dataclass
class TaskCheck:
    task_id: str
    gold_passed: bool
    gold_trace: str = ""
    mutants: int = 0
    killed: int = 0
    weak: bool = False
    survivors: list[str] = field(default_factory=list)  # "operator@line" of mutants that passed

    @property
    def mutation_score(self) -> float | None:
        return self.killed / self.mutants if self.mutants else None


@dataclass
class SelfCheckReport:
    tasks: list[TaskCheck]

    @property
    def gold_failures(self) -> list[TaskCheck]:
        return [t for t in self.tasks if not t.gold_passed]

    @property
    def mutation_score(self) -> float | None:
        n = sum(t.mutants for t in self.tasks)
        return sum(t.killed for t in self.tasks) / n if n else None


def _solution_lines(task: Task, program: str) -> range | None:
    """Line numbers of the gold solution inside the assembled program (the prompt is not mutated)."""
    if program.startswith(task.prompt):
        start = task.prompt.count("\n") + 1
        return range(start, program.count("\n") + 2)
    return None


def self_check(verifier: Verifier, tasks: list[Task], max_mutants: int = 20) -> SelfCheckReport:
    """Run each task's gold solution and up to ``max_mutants`` mutants of it, in batches."""
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
            owners.append((t.task_id, f"{m.operator}@{m.line}"))
    for (tid, label), r in zip(owners, verifier.verify_batch(pairs), strict=True):
        c = checks[tid]
        c.mutants += 1
        if r.passed:
            c.survivors.append(label)
        else:
            c.killed += 1
    return SelfCheckReport([checks[t.task_id] for t in tasks])
