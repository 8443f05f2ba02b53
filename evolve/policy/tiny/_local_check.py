"""Stand-in checker used only while `evolve.verification.Verifier` is unavailable.

Runs each completion in a forked worker with a CPU alarm and compares results
with exact types in the worker (weaker than the real sandbox, which keeps
expected values out of the untrusted process). Results are marked as such.
"""

from __future__ import annotations

import multiprocessing
import signal

from evolve.gym import check
from evolve.verification.types import Task


def _one(args) -> bool:
    tests, entry, code = args

    def _alarm(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(2)
    try:
        return check.passes(code, tests, entry)
    except BaseException:
        return False
    finally:
        signal.alarm(0)


def local_verify(pairs: list[tuple[Task, str]], jobs: int = 2) -> list[bool]:
    work = [(t.hidden_tests + t.visible_tests, t.entry_point, c) for t, c in pairs]
    with multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=200) as pool:
        return pool.map(_one, work, chunksize=16)
