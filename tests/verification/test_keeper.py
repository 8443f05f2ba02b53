"""The slot keeper's kill protocol (server.py), on real processes: the server's ``kill <gen>`` reaches
only the job process it was meant for, never the slot's next one (keepers now live across jobs)."""

from __future__ import annotations

import os
import select
import signal
import time

from evolve.verification.sandbox.keeper import _await_job


def _job(seconds: float) -> tuple[int, int]:
    pid = os.fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(0)
    return pid, os.pidfd_open(pid)


def _run(gen: int, lines: bytes) -> tuple[bool, int, float]:
    r, w = os.pipe()
    pid, pidfd = _job(0.5)
    os.write(w, lines)
    t0 = time.monotonic()
    try:
        stopped = _await_job(r, pidfd, gen, [b""], select.select, signal.SIGKILL)
        _, st = os.waitpid(pid, 0)
    finally:
        for fd in (r, w, pidfd):
            os.close(fd)
    return stopped, st, time.monotonic() - t0


def test_a_kill_for_this_job_kills_it():
    stopped, st, dt = _run(3, b"kill 3\n")
    assert stopped and os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL and dt < 0.4


def test_a_late_kill_for_an_earlier_job_never_reaches_the_next_one():
    # the kill for job 2 arrives after job 2 ended and the keeper forked job 3 (split across reads too)
    stopped, st, dt = _run(3, b"kill 2\nki")
    assert not stopped and os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0 and dt >= 0.4
