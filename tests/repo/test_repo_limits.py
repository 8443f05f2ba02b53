"""The repo runner's limits against hostile code (the static grader-name rule assumed bypassed).

Probe tests run INSIDE a real sandboxed pytest: each passes only while its defence holds (seccomp,
the task cap, rlimits, the capped /tmp, no /proc, the read-only tree), so a removed defence fails
its probe. The batch test grades episodes whose package code attacks at import, between correct
fixes: each attack fails with a trace, and the fixes around it keep reward 1.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from evolve.repo import runner

PROBES = '''
import errno, os, signal

def test_fork_is_denied():
    try:
        pid = os.fork()
    except PermissionError:
        return
    if pid == 0:
        os._exit(0)
    raise AssertionError("fork allowed")

def test_memfd_is_denied():
    try:
        os.memfd_create("x")
    except PermissionError:
        return
    raise AssertionError("memfd allowed")

def test_signals_are_denied():
    try:
        os.kill(os.getpid(), 0)
    except PermissionError:
        return
    raise AssertionError("kill allowed")

def test_threads_are_capped():
    import threading
    # Small stacks: RLIMIT_AS alone stops ~100 threads of 8 MiB; with 64 KiB ones it stops ~315 here
    # (glibc's malloc arenas), so the bound below is the pid namespace's pid_max of 301 (pid 1 + 299).
    threading.stack_size(1 << 16)
    stop, started = threading.Event(), []
    try:
        for _ in range(1000):
            t = threading.Thread(target=stop.wait)
            t.start()
            started.append(t)
    except RuntimeError:
        pass
    finally:
        stop.set()
    assert len(started) <= 299, len(started)

def test_memory_is_capped():
    try:
        big = b"x" * (1536 << 20)
    except MemoryError:
        return
    raise AssertionError(f"{len(big)} bytes allocated")

def test_file_size_is_capped():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        with open("/tmp/big", "wb") as f:
            for _ in range(24):
                f.write(b"x" * (1 << 20))
    except OSError as e:
        assert e.errno == errno.EFBIG, e
        return
    finally:
        os.remove("/tmp/big")
    raise AssertionError("24 MiB file written")

def test_tmp_is_capped():
    written = 0
    try:
        for i in range(8):
            with open(f"/tmp/fill{i}", "wb") as f:
                for _ in range(12):
                    f.write(b"x" * (1 << 20))
                    written += 1
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    assert written < 96, written

def test_no_proc_and_a_read_only_tree():
    assert not os.path.exists("/proc/self"), os.listdir("/proc")
    for path in ("/repo/left.txt", "/left.txt", "/runner/left.txt"):
        try:
            open(path, "w").close()
        except OSError:
            continue
        raise AssertionError(path + " writable")

def test_cpu_files_and_core_are_limited():
    # Their effect is not provoked here (60 s of CPU would be the test's own cost): the limits are read.
    import resource
    inf = resource.RLIM_INFINITY
    assert resource.getrlimit(resource.RLIMIT_CPU)[1] != inf and resource.getrlimit(resource.RLIMIT_CPU)[1] <= 60
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[1] != inf and resource.getrlimit(resource.RLIMIT_NOFILE)[1] <= 256
    assert resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)

def test_tmp_starts_empty_and_nothing_is_left_for_the_next_run():
    assert not os.path.exists("/tmp/marker"), "state left by an earlier run"
    open("/tmp/marker", "w").close()
'''

FLOOD = '''
import os, stat

def test_flood():
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                for _ in range(64):
                    os.write(fd, b"y" * (1 << 20))
        except OSError:
            pass
'''


def _tree(root: Path, body: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_probe.py").write_text(body)
    return root


@pytest.fixture
def host_tmp(tmp_path, monkeypatch):
    """A private host temp folder for the runs (others share /tmp): empty again after every run."""
    d = tmp_path / "host-tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_every_limit_holds_inside_the_sandbox(tmp_path, host_tmp):
    tree = _tree(tmp_path / "pkg", PROBES)
    for _ in range(2):  # the second run must not see the first one's /tmp
        res = runner.run_tests(tree, None, ["tests"], ["/repo"])
        bad = {k: res.failures.get(k, "")[-400:] for k, o in res.outcomes.items() if o != "passed"}
        assert res.complete and len(res.outcomes) == 10 and not bad, (bad, res.output[-1500:])
    assert not os.listdir(host_tmp)  # every run's temp folder is gone


def test_an_output_flood_is_cut_and_the_parent_stays_small(tmp_path):
    res = runner.run_tests(_tree(tmp_path / "pkg", FLOOD), None, ["tests"], ["/repo"])
    assert not res.complete and res.exit_code is None
    assert len(res.output) <= runner.OUTPUT_CAP + 200
    assert res.output.endswith("the run was stopped]"), res.output[-200:]


BURN = '''
import time

def test_burn():
    end = time.process_time() + 0.6
    while time.process_time() < end:
        pass
    print("burnt", flush=True)
    time.sleep(__SLEEP__)
'''


@pytest.mark.parametrize("stopped", [False, True])
def test_a_runs_cpu_time_is_counted_even_when_it_is_stopped(tmp_path, stopped):
    """wait4 on the run: the CPU its tree burnt is the run's cost, also when the parent kills it for time
    (a run that burns and is then stopped must not look cheap)."""
    body = BURN.replace("__SLEEP__", "30" if stopped else "0")
    res = runner.run_tests(_tree(tmp_path / "pkg", body), None, ["tests"], ["/repo"],
                           timeout_s=12 if stopped else runner.TIMEOUT_S)
    assert (res.stopped == "timed out") is stopped and res.complete is not stopped, res.output[-500:]
    assert res.cpu_s >= 0.6, (res.cpu_s, res.output[-500:])
    assert res.cpu_s < res.seconds + 5  # a count of this run, not of the parent process


IMPORT_ATTACKS = {
    "memory-bomb": "_hog = b'x' * (1536 << 20)\n",
    "fork-bomb": "import os\nwhile True:\n    os.fork()\n",
    "output-flood": ("import os, stat\nfor _fd in range(3, 64):\n    try:\n        if stat.S_ISFIFO(os.fstat(_fd).st_mode):\n"
                     "            for _ in range(64):\n                os.write(_fd, b'y' * (1 << 20))\n"
                     "    except OSError:\n        pass\n"),
    "fill-tmp": ("import signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\nfor _i in range(64):\n"
                 "    with open(f'/tmp/f{_i}', 'wb') as _f:\n        _f.write(b'z' * (8 << 20))\n"),
}
EXPECT = {"memory-bomb": "MemoryError", "fork-bomb": "PermissionError", "output-flood": "the run was stopped",
          "fill-tmp": "No space left"}


def _fix(task) -> str:
    diff = task.meta["diff"].splitlines()
    minus = [ln[1:] for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    return json.dumps({"tool": "edit", "path": task.meta["file"], "search": "\n".join(plus), "replace": "\n".join(minus)})


@pytest.mark.parametrize("attack", sorted(IMPORT_ATTACKS))
def test_a_hostile_episode_fails_alone_between_fixes(env, monkeypatch, host_tmp, attack):
    monkeypatch.setattr(runner, "check_edit", lambda *_args: None)  # the static rule bypassed
    task = env.splits()["train"][0]
    head = env.first_messages({}, task)
    fix = head + [{"role": "assistant", "content": _fix(task)}]
    hostile = fix + [{"role": "assistant", "content": json.dumps(
        {"tool": "edit", "path": task.meta["file"], "search": '"""minicalc:',
         "replace": IMPORT_ATTACKS[attack] + '"""minicalc:'})}]
    results = env.wrap_verifier(None).verify_conversations([(task, fix), (task, hostile), (task, fix)])
    assert [r.reward for r in results] == [1.0, 0.0, 1.0], [r.trace for r in results]
    assert EXPECT[attack] in results[1].trace, results[1].trace
    assert not os.listdir(host_tmp)
