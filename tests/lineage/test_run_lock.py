"""One writer per run: the run lock (PostgreSQL advisory lock / SQLite flock) refuses a second
controller at once, is per run, and is released when its holder stops or is killed -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from evolve.errors import LineageError
from evolve.lineage import LineageStore

HOLD = """
import sys, time
from evolve.lineage import LineageStore
store = LineageStore.open(sys.argv[1], create=False)
with store.run_lock("r"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_second_writer_refused_until_first_releases(db_url):
    a, b = LineageStore.open(db_url), LineageStore.open(db_url)
    try:
        with a.run_lock("r"):
            with pytest.raises(LineageError, match="being written by another controller"):
                with b.run_lock("r"):
                    pass
            with b.run_lock("other"):  # the lock is per run
                pass
        with b.run_lock("r"):  # released on exit
            pass
    finally:
        a.close()
        b.close()


def test_killed_holder_releases_the_run(db_url, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(os.getcwd())}
    store = LineageStore.open(db_url)  # first: the holder opens it with create=False
    proc = subprocess.Popen([sys.executable, "-c", HOLD, db_url], stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(LineageError, match="another controller"):
            with store.run_lock("r"):
                pass
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30  # PostgreSQL notices the dropped session within moments
        while True:
            try:
                with store.run_lock("r"):
                    break
            except LineageError:
                assert time.monotonic() < deadline, "a killed controller kept the run locked"
                time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        store.close()


OPEN_AT_ONCE = """
import os, sys, time
from evolve.lineage import LineageStore
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
LineageStore.open(sys.argv[1]).close()
print("opened", flush=True)
"""


def test_processes_opening_a_fresh_database_at_once_all_get_it(db_url, tmp_path):
    """Found as a flaky failure of the test above: two processes opening a fresh database at the same
    moment both read "no schema" and both migrated it, and one failed ("table run already exists")."""
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(os.getcwd())}
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, db_url, str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, out.strip()) for p, (out, _) in zip(procs, outs, strict=True)] == [(0, "opened")] * 4, \
        [err[-800:] for _, err in outs]
    with LineageStore.open(db_url, create=False, auto_upgrade=False) as store:  # at head, and usable
        store.create_run("after")
