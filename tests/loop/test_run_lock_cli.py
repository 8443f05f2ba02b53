"""Two controllers never write one run: `evolve resume RUN` while `evolve run` is still writing RUN is
refused with one line and exit 2, before it can discard the live run's pending generation.
SQLite (flock) and PostgreSQL (advisory lock) when configured."""

from __future__ import annotations

import os
import signal

from loop_helpers import CI_CONFIG, wait_pending


def test_resume_refused_while_another_controller_writes(loop_db, tmp_path):
    proc = loop_db.popen("run", "--config", CI_CONFIG, "--name", "live", "--generations", "3", log=tmp_path / "log")
    try:
        wait_pending(loop_db, "live", 1, proc)
        before = len(loop_db.statuses("live"))
        second = loop_db.evolve("resume", "live", check=False)
        assert second.returncode == 2
        assert "being written by another controller" in second.stderr
        assert "Traceback" not in second.stderr
        assert len(loop_db.statuses("live")) >= before  # the live pending generation was not discarded
        assert proc.poll() is None, "the live controller was disturbed"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert loop_db.evolve("check", "live").returncode == 0
