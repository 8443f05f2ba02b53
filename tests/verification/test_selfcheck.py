"""Self-check: gold solutions must pass; mutants are generated and mostly killed."""

from __future__ import annotations

from evolve.verification import Task, TestCase
from evolve.verification.mutants import mutants
from evolve.verification.selfcheck import self_check

GOLD = "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x + 0\n"


def test_mutant_operators():
    ops = {m.operator for m in mutants(GOLD, limit=50)}
    assert {"swap-cmp", "off-by-one", "drop-branch", "early-return", "swap-arith"} <= ops
    srcs = [m.source for m in mutants(GOLD, limit=50)]
    assert len(srcs) == len(set(srcs)) and all(compile(s, "m", "exec") for s in srcs)


def test_self_check_scores_tests_and_lists_gold_failures(verifier):
    tests = tuple(TestCase(a, e) for a, e in [((5, 0, 10), 5), ((-1, 0, 10), 0), ((11, 0, 10), 10),
                                               ((0, 0, 10), 0), ((10, 0, 10), 10)])
    good = Task("clamp", "", "clamp", hidden_tests=tests, canonical_solution=GOLD)
    weak = Task("weak", "", "clamp", hidden_tests=tests[:1], canonical_solution=GOLD)
    broken = Task("broken", "", "clamp", hidden_tests=tests, canonical_solution=GOLD.replace("return lo", "return hi"))
    rep = self_check(verifier, [good, weak, broken], max_mutants=20)
    by = {c.task_id: c for c in rep.tasks}
    assert by["clamp"].gold_passed and by["clamp"].mutants > 5
    assert by["clamp"].mutation_score > by["weak"].mutation_score
    assert [c.task_id for c in rep.gold_failures] == ["broken"]
    assert 0 < rep.mutation_score < 1
