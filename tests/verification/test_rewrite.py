"""The HumanEval check rewriter and the parent-side comparisons."""

from __future__ import annotations

from evolve.verification.rewrite import compare, rewrite_check


def test_assert_forms_become_tests():
    src = '''
METADATA = {}

def check(candidate):
    import math
    x = [1, 2] * 2
    assert candidate(x) == 6, "msg"
    assert 3 == candidate([1, 2])
    assert abs(candidate([1.0]) - 1.0) < 1e-6
    assert math.isclose(candidate([0.5]), 0.5, abs_tol=1e-3)
    assert candidate([1]) is True
    assert not candidate([])
    assert candidate([7])
    assert tuple(candidate([3, 1])) == (1, 3)
    for i in range(2):
        assert candidate([i]) == i
    assert True
'''
    rw = rewrite_check(src)
    assert not rw.weak, rw.reason
    kinds = [(t.inputs, t.compare) for t in rw.tests]
    assert kinds[0] == (([1, 2, 1, 2],), "eq") and rw.tests[0].expected == 6
    assert [k for _, k in kinds] == ["eq", "eq", "close", "isclose", "is", "falsy", "truthy", "tuple:eq", "eq", "eq"]
    assert rw.tests[-1].inputs == ([1],) and rw.tests[-1].expected == 1


def test_unrewritable_checks_fall_back_to_weak():
    assert rewrite_check("def check(candidate):\n    y = candidate(1)\n    assert y + 1 == 3\n").weak
    assert rewrite_check("import random\ndef check(c):\n    assert c(random.random()) == 1\n").weak
    assert rewrite_check("def check(c):\n    while True:\n        assert c(1)\n").weak
    assert rewrite_check("x = 1\nprint(x)\ndef check(c):\n    assert c(1) == 1\n").weak
    assert rewrite_check("def nope(c): pass\n").weak


def test_comparisons():
    assert compare("eq", [1, 2], [1, 2]) and not compare("eq", [1, 2], (1, 2))
    assert compare("close", 1.0000001, 1.0, 1e-6) and not compare("close", "1", 1.0, 1e-6)
    assert compare("is", True, True) and not compare("is", 1, True)
    assert compare("tuple:eq", [1, 2], (1, 2)) and not compare("tuple:eq", 5, (5,))
    assert compare("isclose", 0.1 + 0.2, 0.3, -1e-9)
