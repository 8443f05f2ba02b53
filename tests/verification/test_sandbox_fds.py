"""A job's verdict must not depend on how many files its parent holds open.

The server moves each slot's pipes onto fds 0-4 inside the job. It once did so via fixed numbers
(60-63): when the parent held ~45-60 fds (a Ray driver does), a slot's pipe landed on one of them
and was clobbered, and correct samples failed with EBADF, or a job could be wired to another slot."""

from __future__ import annotations

import os

import pytest

from evolve.verification import Verifier
from evolve.verification.types import Task, TestCase

GOOD, BAD = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"
TASK = Task("add", "", "add", hidden_tests=(TestCase((1, 2), 3), TestCase((2, 2), 4)), canonical_solution=GOOD)


@pytest.mark.parametrize("held", [0, 40, 45, 50, 55, 60])
def test_verdicts_do_not_depend_on_the_parents_open_fds(held):
    hold = [os.open("/dev/null", os.O_RDONLY) for _ in range(held)]
    try:
        with Verifier(None, jobs=2) as v:
            results = v.verify_batch([(TASK, GOOD)] * 6 + [(TASK, BAD)] * 2)
    finally:
        for fd in hold:
            os.close(fd)
    assert [r.passed for r in results] == [True] * 6 + [False] * 2, [r.trace[:160] for r in results]
