"""Differential testing against the reference solution: does a program agree with it on new inputs?

Used by the self-check (a surviving mutant that agrees with the gold solution on every generated
input is *probably equivalent*: no test of this kind could kill it) and by test augmentation (an
input on which a survivor disagrees becomes a test, its expected value the reference's output).

Both programs run in the sandbox (``Verifier.run_calls``); their plain results are compared here, in
the trusted parent, the way the task's own tests compare (``oracle_for``): a task whose tests use a
float tolerance compares within it, a task whose tests sort the result compares sorted, and the
pipeline's strict types hold. An input on which the reference does not return a plain value (it
raises: the input breaks the task's preconditions; it times out; it returns something unplain) is
no evidence either way and is left out: ``usable``.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolve.verification.contracts import admits, contract_for
from evolve.verification.inputgen import mutate_inputs, task_rng
from evolve.verification.sandbox_output import Outcome, Reply, loaded
from evolve.verification.stages.tests import judge
from evolve.verification.types import Task, TestCase
from evolve.verification.verifier import Verifier


@dataclass(frozen=True)
class Oracle:
    """How a generated test compares a result with the reference's: a TestCase's ``compare`` and ``tol``."""

    compare: str = "eq"
    tol: float = 0.0


def oracle_for(verifier: Verifier, task: Task) -> Oracle:
    """The comparison the task's own tests use, when they all use one kind: a tolerance (the largest
    of the task's), or one transform (``sorted:eq``); else ``eq``. Record/replay checks are ``eq``."""
    plan = verifier.plan(task)
    tests = plan.visible + plan.hidden
    kinds = {t.compare for t in tests}
    if tests and kinds <= {"close", "isclose"}:
        return Oracle(tests[0].compare, max(t.tol for t in tests))
    if len(kinds) == 1 and ":" in next(iter(kinds)):
        return Oracle(next(iter(kinds)))
    return Oracle()


def generated_inputs(verifier: Verifier, task: Task, n: int, seed: int) -> list[tuple]:
    """Up to ``n`` new inputs for ``task``: type-aware mutations of its own tests' arguments (seeded per
    task), those that break the task's input contract (``contracts``) dropped. Call after the task was
    verified once, so that a recorded check's calls are known."""
    contract = contract_for(task)
    made = mutate_inputs(list(verifier.plan(task).calls), n if contract is None else 4 * n,
                         task_rng(seed, task.task_id))
    return [a for a in made if admits(contract, a)][:n]


CHUNK = 25  # generated calls per sandbox job: one slow input costs a chunk its time limit, not every input


def run_outputs(verifier: Verifier, items: list[tuple[Task, str, list[tuple]]]) -> list[list[Outcome]]:
    """Each (task, program, calls): one Outcome per call, still encoded. Calls run in chunks of ``CHUNK``;
    a chunk whose job loaded nothing or raised a hack flag gives "missing" for all its calls (a job killed
    before its last result keeps what it finished; one killed after it keeps nothing: sandbox_output.py)."""
    jobs, spans = [], []
    for task, program, calls in items:
        spans.append((len(jobs), (len(calls) + CHUNK - 1) // CHUNK))
        jobs += [(task, program, calls[i:i + CHUNK]) for i in range(0, len(calls), CHUNK)]
    replies = verifier.run_calls(jobs)
    return [[o for r in replies[at:at + n] for o in _outcomes(r)] for at, n in spans]


def _outcomes(reply: Reply) -> list[Outcome]:
    if reply.flags or reply.load_error is not None:
        return [Outcome("missing")] * len(reply.results)
    return list(reply.results)


def usable(reference: list[Outcome]) -> list[int]:
    """Indices of the calls on which the reference returned a plain value (nothing else is evidence)."""
    return [k for k, o in enumerate(reference) if o.status == "ok"]


def agrees(oracle: Oracle, strict: bool, reference: Outcome, got: Outcome) -> bool:
    """Whether ``got`` passes a test whose expected value is the reference's result (both undecoded)."""
    if got.status != "ok" or reference.status != "ok":
        return False
    if oracle.compare == "eq" and reference.raw is not None and reference.raw == got.raw:
        return True  # the same encoding is the same plain value, exact types included (NaN too)
    ref, out = loaded(reference), loaded(got)
    if ref.status != "ok" or out.status != "ok":
        return False
    test = TestCase((), ref.value, oracle.compare, oracle.tol)
    if ":" in oracle.compare:  # a transform hides the types: strict types then need the reference's result
        return judge(test, out.value, strict, ref.value) is None
    return judge(test, out.value, strict) is None


def disagreements(oracle: Oracle, strict: bool, reference: list[Outcome], other: list[Outcome],
                  keep: list[int]) -> list[int]:
    """The calls among ``keep`` on which ``other`` does not agree with the reference (a crash, a missing
    result or an error disagrees)."""
    return [k for k in keep if not agrees(oracle, strict, reference[k], other[k])]
