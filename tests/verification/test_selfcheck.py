"""Self-check: gold solutions must pass; mutants are generated and mostly killed."""

from __future__ import annotations

import re

from conftest import REPO

from evolve.verification import Task, TestCase
from evolve.verification.inputgen import mutate_inputs, task_rng
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


# -- issue 39: generated inputs, and probably-equivalent mutants told from survivors ------------------
ABSDIFF = "def absdiff(a, b):\n    if a >= b:\n        return a - b\n    return b - a\n"
SEEDS = [(3, "abc", [1, 2, 3], (1, 2.5)), (10, "cab", [], (4, 0.5)), (0, "", [7], (0, 1.0))]


def test_generated_inputs_are_seeded_and_keep_types_signs_and_alphabets():
    a = mutate_inputs(SEEDS, 200, task_rng(0, "T/1"))
    assert a == mutate_inputs(SEEDS, 200, task_rng(0, "T/1"))  # reproducible: same seed, same task
    assert a != mutate_inputs(SEEDS, 200, task_rng(1, "T/1")) and a != mutate_inputs(SEEDS, 200, task_rng(0, "T/2"))
    assert len(a) == 200 and not set(map(repr, a)) & set(map(repr, SEEDS)) and len(set(map(repr, a))) == 200
    for args in a:
        n, s, xs, (k, f) = args  # arity and the tuple's shape kept
        assert type(n) is int and n >= 0 and type(s) is str and set(s) <= set("abc")  # signs, alphabet
        assert type(xs) is list and all(type(x) is int and x >= 0 for x in xs) and type(k) is int and type(f) is float
    for i in range(4):  # every argument position does change
        assert len({repr(x[i]) for x in a}) > 10, i
    dates = [x[0] for x in mutate_inputs([("04-12-2003",)], 60, task_rng(0, "d"))]
    assert sum(bool(re.fullmatch(r"\d\d-\d\d-\d{4}", d)) for d in dates) >= 10, dates  # numbers in text, as numbers


def test_equivalent_mutants_are_told_from_real_survivors(verifier):
    """One test, (5, 3): the swap-cmp mutant (a > b) equals the gold everywhere, the else branch's
    b + a only where b > a, which the test never tries. The first is probably equivalent, the second not."""
    t = Task("absdiff", "", "absdiff", hidden_tests=(TestCase((5, 3), 2),), canonical_solution=ABSDIFF)
    rep = self_check(verifier, [t], max_mutants=50, equiv_inputs=40, seed=3)
    c = rep.tasks[0]
    assert c.mutants == 5 and c.killed == 3 and sorted(c.survivors) == ["swap-arith@4", "swap-cmp@2"], c
    assert c.equivalent == ["swap-cmp@2"] and c.inputs == 40, c
    assert c.score_non_equivalent == rep.score_non_equivalent == 3 / 4 and rep.mutation_score == 3 / 5
    off = self_check(verifier, [t], max_mutants=50, equiv_inputs=0)
    assert off.tasks[0].equivalent == [] and off.score_non_equivalent == 3 / 5


def test_the_verifier_version_tells_tuples_from_lists_and_takes_any_plain_test():
    from evolve.verification import load_pipeline
    from evolve.verification.selfcheck import verifier_version

    pipe = load_pipeline(None)
    a = Task("x", "", "f", hidden_tests=(TestCase(((1, 2),), {1: "a", "b": 2}),))  # a dict of mixed key types
    b = Task("x", "", "f", hidden_tests=(TestCase(([1, 2],), {1: "a", "b": 2}),))
    assert verifier_version(pipe, [a]) != verifier_version(pipe, [b]) != verifier_version(load_pipeline(
        REPO / "verifiers" / "humaneval.toml"), [b])
    assert verifier_version(pipe, [a]) == verifier_version(load_pipeline(None), [a])
