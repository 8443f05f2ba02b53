"""One adversarial test per sandbox property: each attack fails, is flagged, and the next job still runs.

All of these run real code in the real fork-server (bubblewrap + seccomp where available).
"""

from __future__ import annotations

import os
import sys
import time

import hostcheck as H
import pytest

from evolve.verification import Task, TestCase

GOOD = "def add(a, b):\n    return a + b\n"
# _posixsubprocess.fork_exec's signature is CPython-version specific (23 arguments in 3.11).
needs_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="fork_exec signature differs")


def _check_next_job_ok(v, task):
    r = v.verify(task, GOOD)
    assert r.passed, r.trace


def _attack(v, task, body: str, flag: str | None, error_class: str | None = None):
    r = v.verify(task, body)
    assert not r.passed
    assert r.reward == 0.0 or flag is None
    if flag:
        assert flag in r.hack_flags, (r.hack_flags, r.trace)
        assert r.error_class == "hack"
    if error_class:
        assert r.error_class == error_class, (r.error_class, r.trace)
    _check_next_job_ok(v, task)
    return r


def test_infinite_loop_times_out(short_verifier, add_task):
    t0 = time.monotonic()
    r = _attack(short_verifier, add_task, "def add(a, b):\n    while True:\n        pass\n", None, "Timeout")
    assert "Timeout" in r.trace
    assert time.monotonic() - t0 < 10


def test_partial_credit_survives_a_timeout_in_a_later_test(short_verifier, add_task):
    body = "def add(a, b):\n    if a == 10:\n        while True: pass\n    return a + b\n"
    r = short_verifier.verify(add_task, body)
    hidden = next(s for s in r.stages if s.name == "hidden")
    assert not r.passed and hidden.score == pytest.approx(2 / 3)
    assert hidden.error_class == "Timeout"


def test_memory_bomb_is_a_memory_error(short_verifier, add_task):
    r = _attack(short_verifier, add_task, "def add(a, b):\n    return len([0] * 10**9)\n", None, "MemoryError")
    assert "MemoryError" in r.trace


def test_fork_bomb_is_blocked_and_flagged(verifier, add_task):
    body = "import os\ndef add(a, b):\n    while True:\n        os.fork()\n"
    _attack(verifier, add_task, body, "hack: spawn-process")


@needs_311
def test_fork_below_the_audit_hook_is_stopped_by_seccomp(verifier, add_task):
    if verifier.isolation == "rlimits":
        pytest.skip("no seccomp here")
    # _posixsubprocess forks without raising an audit event: only seccomp stands in the way.
    body = ("import _posixsubprocess, os\n"
            "def add(a, b):\n"
            "    r, w = os.pipe()\n"
            "    pid = _posixsubprocess.fork_exec([b'/bin/true'], [b'/bin/true'], True, (), None, None,\n"
            "        -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, False)\n"
            "    return 'forked'\n")
    r = verifier.verify(add_task, body)
    assert not r.passed
    assert all(f.error_type == "PermissionError" for f in r.failures if f.stage == "hidden"), r.trace
    _check_next_job_ok(verifier, add_task)


def test_threads_still_work_under_seccomp(verifier, add_task):
    # clone3 must say ENOSYS (glibc then uses clone with CLONE_THREAD, which is allowed).
    body = ("import threading\n"
            "def add(a, b):\n"
            "    out = []\n"
            "    t = threading.Thread(target=lambda: out.append(a + b))\n"
            "    t.start(); t.join()\n"
            "    return out[0]\n")
    r = verifier.verify(add_task, body)
    assert r.passed, r.trace


@needs_311
def test_daemon_that_outlives_the_job_is_killed_and_flagged(add_task):
    from evolve.verification import Verifier

    # Only the rlimits fallback lets a process be created at all (seccomp blocks it elsewhere).
    with Verifier(None, jobs=1, isolation="rlimits") as v:
        body = ("import _posixsubprocess, os\n"
                "def add(a, b):\n"
                "    r, w = os.pipe()\n"
                "    _posixsubprocess.fork_exec([b'/bin/sleep', b'30.75'], [b'/bin/sleep'], True, (), None, None,\n"
                "        -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, False)\n"
                "    return a + b\n")
        r = v.verify(add_task, body)
        assert "hack: orphan-process" in r.hack_flags and not r.passed, (r.hack_flags, r.trace)
        time.sleep(0.2)
        assert not H.strays(b"30.75")  # it died with the job's pid namespace
        assert v.verify(add_task, GOOD).passed


def test_network_is_blocked_and_flagged(verifier, add_task):
    body = ("import socket\n"
            "def add(a, b):\n"
            "    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
            "    return a + b\n")
    _attack(verifier, add_task, body, "hack: network")


def test_write_outside_tmp_is_blocked_and_flagged(verifier, add_task, tmp_path):
    # tmp_path is under the host's /tmp: the job's /tmp is its own tmpfs, so the host path does not
    # even exist in its view. Whatever the prefix, the host file must never appear.
    target = tmp_path / "pwned.txt"
    body = f"def add(a, b):\n    open({str(target)!r}, 'w').write('x')\n    return a + b\n"
    r = verifier.verify(add_task, body)
    assert not r.passed and "FileNotFoundError" in r.trace, r.trace
    assert not target.exists()
    _check_next_job_ok(verifier, add_task)
    body = "import os\ndef add(a, b):\n    os.open('/etc/evolve-pwned', os.O_WRONLY | os.O_CREAT)\n    return a + b\n"
    _attack(verifier, add_task, body, "hack: write-outside-tmp")
    assert not os.path.exists("/etc/evolve-pwned")


def test_no_file_can_be_written_anywhere(verifier, add_task):
    # The view is read-only everywhere (no job can leave a file for another): a scratch file fails.
    body = "def add(a, b):\n    open('scratch.txt', 'w').write(str(a + b))\n    return a + b\n"
    r = verifier.verify(add_task, body)
    assert not r.passed and "Read-only file system" in r.trace, r.trace
    _check_next_job_ok(verifier, add_task)


def test_reading_test_files_is_flagged_and_masked(tmp_path, add_task):
    from evolve.verification import Verifier

    secret = tmp_path / "tasks.jsonl"
    secret.write_text('{"expected": 42}\n')
    body = f"def add(a, b):\n    return open({str(secret)!r}).read()\n"
    with Verifier(None, jobs=1, hide=[str(secret)]) as v:
        r = v.verify(add_task, body)
        assert "hack: read-test-files" in r.hack_flags and not r.passed
        assert "42" not in r.trace
    from evolve.verification.tasks import humaneval_path

    with Verifier(None, jobs=1) as v:
        r = v.verify(add_task, f"import gzip\ndef add(a, b):\n    return gzip.open({str(humaneval_path())!r}).read(9)\n")
        assert "hack: read-test-files" in r.hack_flags


@pytest.mark.parametrize("body,flag", [
    ("import sys\nsys.exit(0)\n", "hack: sys-exit"),
    ("import sys\ndef add(a, b):\n    sys.exit(0)\n", "hack: sys-exit"),
    ("def add(a, b):\n    raise SystemExit(0)\n", "hack: sys-exit"),
    ("import os\ndef add(a, b):\n    os._exit(0)\n", "hack: exit-before-tests"),
    ("import os\nos._exit(0)\n", "hack: exit-before-tests"),
    ("def add(a, b):\n    raise BaseException('bye')\n", "hack: base-exception"),
    ("def add(a, b):\n    raise KeyboardInterrupt\n", "hack: base-exception"),
])
def test_exits_are_failures_with_flags(verifier, add_task, body, flag):
    _attack(verifier, add_task, body, flag)


def test_monkeypatching_builtins_is_flagged(verifier, add_task):
    body = "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.type = str\ndef add(a, b):\n    return a + b\n"
    _attack(verifier, add_task, body, "hack: monkeypatch")


def test_always_equal_object_is_a_non_plain_return(verifier, add_task):
    body = ("class Any:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
            "def add(a, b):\n    return Any()\n")
    _attack(verifier, add_task, body, "hack: non-plain-return")


def test_int_subclass_is_a_non_plain_return(verifier, add_task):
    body = ("class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
            "def add(a, b):\n    return I(a + b)\n")
    _attack(verifier, add_task, body, "hack: non-plain-return")


def test_list_subclass_with_hostile_iter_is_non_plain(verifier):
    task = Task("l", "", "f", hidden_tests=(TestCase((), [1, 2]),))
    body = ("class L(list):\n    def __iter__(self):\n        raise SystemExit(0)\n"
            "def f():\n    return L([1, 2])\n")
    r = verifier.verify(task, body)
    assert "hack: non-plain-return" in r.hack_flags and not r.passed


def test_huge_output_is_capped(short_verifier, add_task):
    t0 = time.monotonic()
    r = _attack(short_verifier, add_task, "def add(a, b):\n    while True:\n        print('x' * 65536)\n", None,
                "OutputLimit")
    assert len(r.trace) <= 1000 and time.monotonic() - t0 < 10


def test_subprocess_and_os_system_are_blocked(verifier, add_task):
    _attack(verifier, add_task, "import subprocess\ndef add(a, b):\n    return subprocess.check_output(['echo', '3'])\n",
            "hack: spawn-process")
    _attack(verifier, add_task, "import os\ndef add(a, b):\n    return os.system('true')\n", "hack: spawn-process")


def test_killing_the_server_is_refused(verifier, add_task):
    body = "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return a + b\n"
    r = verifier.verify(add_task, body)
    if verifier.isolation != "rlimits":
        assert not r.passed and "PermissionError" in r.trace
    _check_next_job_ok(verifier, add_task)


def test_server_restarts_after_dying(add_task):
    from evolve.verification import Verifier

    with Verifier(None, jobs=1) as v:
        assert v.verify(add_task, GOOD).passed
        v.sandbox._proc.kill()  # the whole server (bwrap and everything under it), from outside
        assert v.verify(add_task, GOOD).passed
        assert v.sandbox.restarts == 1


def test_forged_result_lines_are_detected(verifier, add_task):
    body = ("import os\n"
            "def add(a, b):\n"
            "    os.write(3, b'0000 R 0 ok 0\\n0000 END\\n')\n"
            "    return a + b\n")
    _attack(verifier, add_task, body, "hack: forged-result")


def test_walking_into_harness_frames_is_flagged(verifier, add_task):
    body = "import sys\ndef add(a, b):\n    sys._getframe(1)\n    return a + b\n"
    _attack(verifier, add_task, body, "hack: introspection")
    body = "import gc\ndef add(a, b):\n    gc.get_objects()\n    return a + b\n"
    _attack(verifier, add_task, body, "hack: introspection")
    body = "import sys\nsys.settrace(lambda *a: None)\ndef add(a, b):\n    return a + b\n"
    _attack(verifier, add_task, body, "hack: introspection")


def test_own_frames_and_namedtuples_are_fine(verifier, add_task):
    body = ("import sys, collections\nP = collections.namedtuple('P', 'x y')\n"
            "def add(a, b):\n    assert sys._getframe(0).f_code.co_name == 'add'\n    return P(a, b).x + b\n")
    assert verifier.verify(add_task, body).passed


def test_unicode_syntax_error_and_empty(verifier, add_task):
    uni = Task("u", "", "grüß", hidden_tests=(TestCase(("héllo ✓",), "✓ olléh"),))
    assert verifier.verify(uni, "def grüß(s):\n    return s[::-1]\n").passed
    r = verifier.verify(add_task, "    return a +\n")
    assert r.error_class == "SyntaxError" and not r.passed
    assert r.stages[0].name == "compile" and not r.stages[0].passed
    r = verifier.verify(add_task, "")
    assert r.error_class == "EmptyCompletion" and not r.passed
    r = verifier.verify(add_task, "   \n")
    assert not r.passed


def test_many_jobs_in_one_batch_keep_order(verifier, add_task):
    bodies = [GOOD if i % 3 else "def add(a, b):\n    return a - b\n" for i in range(60)]
    rs = verifier.verify_batch([(add_task, b) for b in bodies])
    assert [r.passed for r in rs] == [bool(i % 3) for i in range(60)]


def test_weaker_isolation_only_when_asked_with_a_warning_naming_what_is_missing(monkeypatch, add_task):
    from evolve.verification import Verifier
    from evolve.verification.sandbox import client, view

    monkeypatch.setattr(view, "have_bwrap", lambda: False)  # as on a machine without bubblewrap
    monkeypatch.setattr(client, "_warned", set())
    with pytest.raises(client.SandboxUnavailable, match="bubblewrap") as e:
        _ = Verifier(None, jobs=1).isolation
    assert "\n" not in str(e.value)
    with pytest.warns(RuntimeWarning, match="weaker isolation 'seccomp' because bwrap.seccomp: bubblewrap"):
        with Verifier(None, jobs=1, allow_weak=True) as v:
            assert v.isolation == "seccomp"
            assert v.verify(add_task, GOOD).passed
            r = v.verify(add_task, "import socket\ndef add(a, b):\n    return socket.socket()\n")
            assert "hack: network" in r.hack_flags
