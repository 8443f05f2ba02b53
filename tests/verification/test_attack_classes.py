"""Issue #11, one test per attack class, under the default isolation (bubblewrap + seccomp).

Every batch puts correct and wrong controls before and after the attackers; each test asserts the
attackers fail, every control keeps its true verdict, and (where the class reaches outside a job)
nothing on the host was written, signalled or left running. The corpus is in attackers.py.
Classes 3 (forged results) and 5 (parent blow-ups) are in test_attack_results.py.
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import attackers as A
import hostcheck as H
import pytest
from conftest import ADD, REPO

from evolve.verification import Verifier
from evolve.verification.sandbox import client, view
from evolve.verification.tasks import humaneval_path


def _controls_hold(seq, rs):
    """GOOD (and sibling) programs pass, BAD ones fail as wrong answers; returns the other results."""
    others = []
    for src, r in zip(seq, rs, strict=True):
        if src == A.GOOD or src.startswith("SECRET =") or src.startswith("import time\ndef add"):
            assert r.passed, (src[:40], r.trace)
        elif src == A.BAD:
            assert not r.passed and r.error_class == "WrongAnswer", r.trace
        else:
            others.append(r)
    return others


def _evidence(r) -> str:
    return r.trace + " | " + " | ".join(f.got_repr + " " + f.message for f in r.failures)


def _sandwich(attacks: list[str], fill: list[str]) -> list[str]:
    seq = [A.GOOD, A.BAD, *fill]
    for a in attacks:
        seq += [a, *fill]
    return seq + [A.GOOD, A.BAD]


# -- 1 ---------------------------------------------------------------------------------------------
def test_1_no_job_can_read_another_jobs_data(verifier):
    siblings = [A.good_with_secret(i) for i in range(3)]
    seq = _sandwich(list(A.READ_OTHERS.values()), siblings)
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    hits = _controls_hold(seq, rs)
    assert len(hits) == len(A.READ_OTHERS)
    for r in hits:
        assert not r.passed and A.MARK not in _evidence(r) and "stolen" not in _evidence(r), _evidence(r)
    locks = rs[seq.index(A.READ_OTHERS["lock and watch channel"])]
    assert "got (-1, [])" in locks.trace, locks.trace  # no lock or watch could be taken
    walk = rs[seq.index(A.READ_OTHERS["object-graph walk"])]
    assert "got []" in walk.trace, walk.trace  # it walked, and found nothing of the siblings
    # From the host: neither the server nor its forked-ahead job processes ever held a sibling's source.
    pids = H.harness_pids(verifier)
    assert len(pids) >= 2
    # the scan does read their memory: the harness code (arrives marshalled, so its file name, not its text)
    assert all(H.memory_contains(p, b"<evolve-harness>") for p in pids)
    assert not [p for p in pids if H.memory_contains(p, A.MARK.encode())]


# -- 2 ---------------------------------------------------------------------------------------------
def test_2_no_answer_oracle_is_reachable(tmp_path, monkeypatch):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "ORACLE_TASKS_7", "expected": 3}\n')
    monkeypatch.setenv("EVOLVE_TEST_SECRET", "ORACLE_ENV_7")
    subs = {"repo": str(REPO), "tasks": str(tasks), "tasks_dotted": str(tasks).replace("/tmp/", "/tmp/./"),
            "humaneval": str(humaneval_path())}
    seq = _sandwich([src % subs for src in A.ORACLES.values()], [A.GOOD])
    with Verifier(None, jobs=2, hide=[str(tasks)]) as v:  # started now: this environment is the parent's
        rs = v.verify_batch([(ADD, s) for s in seq])
    hits = _controls_hold(seq, rs)
    assert len(hits) == len(A.ORACLES)
    for r in hits:
        text = _evidence(r)
        assert not r.passed
        for secret in ("ORACLE_", "root:", "def ", "EVOLVE_TEST_SECRET", "canonical_solution"):
            assert secret not in text, (secret, text)
        got = " ".join(f.got_repr for f in r.failures)  # what it obtained (its own error messages aside)
        assert "/work" not in got and "site-packages" not in got, got
    env = rs[seq.index(A.ORACLES["environment"] % subs)]
    seen = ast.literal_eval(env.failures[0].got_repr.rsplit(" (", 1)[0])
    assert {k for k, _ in seen} <= {"PYTHONHASHSEED", "LC_CTYPE", "PWD"}, seen  # nothing of the parent's


# -- 4 ---------------------------------------------------------------------------------------------
SLOW_GOOD = "import time\ndef add(a, b):\n    time.sleep(0.15)\n    return a + b\n"


def test_4_no_job_can_signal_or_write_into_siblings_or_the_server(verifier):
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        server = verifier.sandbox._proc.popen.pid
        restarts = verifier.sandbox.restarts
        seq = _sandwich(list(A.SABOTAGE.values()), [SLOW_GOOD, A.GOOD, A.BAD])
        rs = verifier.verify_batch([(ADD, s) for s in seq])
        hits = _controls_hold(seq, rs)
        assert len(hits) == len(A.SABOTAGE) and not any(r.passed for r in hits)
        assert verifier.sandbox.restarts == restarts and verifier.sandbox._proc.popen.pid == server
        kills = rs[seq.index(A.SABOTAGE["kill every pid"])]
        assert "got (-1, 0)" in kills.trace, kills.trace  # not one signal was delivered anywhere
        raw = rs[seq.index(A.SABOTAGE["raw syscalls through the server's libc"])]
        assert "got (-1, [(62, -1), (62, -1), (62, -1), (101, -1), (272, -1), (165, -1), (126, 0)])" in raw.trace \
            or "got 'no handle'" in raw.trace, raw.trace  # capset to nothing is all it may do
        fds = rs[seq.index(A.SABOTAGE["write other processes' fds and memory"])]
        assert "got (-1, [])" in fds.trace, fds.trace
        assert sleeper.poll() is None and not H.strays(b"7777.25")
        again = verifier.verify_batch([(ADD, A.GOOD), (ADD, A.BAD)])  # the same server goes on
        assert again[0].passed and not again[1].passed and verifier.sandbox._proc.popen.pid == server
    finally:
        sleeper.kill()
        sleeper.wait()


def test_4_a_stopped_server_is_detected_by_the_parent_and_replaced():
    with Verifier(None, jobs=2) as v:
        v.sandbox.config = replace(v.sandbox.config, grace_s=1.0)
        assert v.verify(ADD, A.GOOD).passed
        pids = H.harness_pids(v)
        server = next(p for p in pids if H._ppid(p) not in pids)  # the one whose parent is not a harness
        os.kill(server, signal.SIGSTOP)  # what a job could do if it could reach the server (it cannot)
        t0 = time.monotonic()
        # 8 jobs: the 6 processes forked ahead run (and their keepers report) without the server; the
        # 7th needs it, and the parent's deadline on the server's own "done" finds it stopped.
        rs = v.verify_batch([(ADD, A.GOOD), (ADD, A.BAD)] * 4)
        assert [r.passed for r in rs] == [True, False] * 4
        assert v.sandbox.restarts == 1 and time.monotonic() - t0 < 30


# -- 6 ---------------------------------------------------------------------------------------------
def test_6_missing_bubblewrap_or_libseccomp_is_refused_by_default_naming_it(monkeypatch):
    monkeypatch.setattr(view, "have_bwrap", lambda: False)
    with pytest.raises(client.SandboxUnavailable, match=r"bubblewrap \(bwrap\) is not installed") as e:
        _ = Verifier(None, jobs=1).isolation
    assert "\n" not in str(e.value)
    monkeypatch.setattr(view, "have_bwrap", lambda: True)
    monkeypatch.setattr(client, "job_filter", lambda: (None, "libseccomp/pyseccomp unavailable (OSError: x)"))
    with pytest.raises(client.SandboxUnavailable, match="bwrap.seccomp: libseccomp/pyseccomp unavailable"):
        _ = Verifier(None, jobs=1).isolation
    monkeypatch.setattr(client, "_warned", set())
    with pytest.warns(RuntimeWarning, match="'rlimits' because bwrap.seccomp: libseccomp.*; seccomp: libseccomp"):
        with Verifier(None, jobs=1, allow_weak=True) as v:  # asked for: the weakest, said exactly why
            assert v.isolation == "rlimits" and v.verify(ADD, A.GOOD).passed


FALLBACK_ATTACKS = [
    A._KERNEL + "import os\ndef add(a, b):\n    k = _kernel()\n"
    "    return a - b, [k.syscall(2, p, os.O_WRONLY | os.O_TRUNC) for p in (%(rel)r, %(dotted)r)]\n",
    "import os\ndef add(a, b):\n    out = []\n    for f in (os.chmod, os.unlink):\n        try:\n"
    "            f(%(dotted)r) if f is os.unlink else f(%(dotted)r, 0o777)\n"
    "        except OSError as e:\n            out.append(e.errno)\n    return a - b, out\n",
    "import os\ndef add(a, b):\n    try:\n        os.kill(%(sleeper)d, 9)\n    except OSError as e:\n"
    "        return a - b, e.errno\n",
    "def add(a, b):\n    return open('/proc/%(parent)d/cmdline').read()\n",
    "def add(a, b):\n    open('/dev/shm/evolve-left-behind', 'w').write('x')\n    return a - b\n",
]


@pytest.mark.parametrize("level", ["seccomp", "rlimits"])
def test_6_the_explicit_fallbacks_keep_the_host_safe(level, tmp_path):
    canaries = H.Canaries([tmp_path / "c0", Path("/var/tmp") / f"evolve-canary-{os.getpid()}"])
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        subs = {"rel": os.path.relpath(canaries.paths[1], "/tmp"), "dotted": str(canaries.paths[1]).replace("/", "/./"),
                "sleeper": sleeper.pid, "parent": os.getpid()}
        seq = _sandwich([a % subs for a in FALLBACK_ATTACKS], [A.GOOD])
        with Verifier(None, jobs=2, isolation=level) as v:
            assert v.isolation == level
            rs = v.verify_batch([(ADD, s) for s in seq])
        assert not any(r.passed for r in _controls_hold(seq, rs))
        assert canaries.unchanged() and sleeper.poll() is None
        assert not os.path.exists("/dev/shm/evolve-left-behind")
    finally:
        sleeper.kill()
        sleeper.wait()
        canaries.remove()


def test_6_cli_refuses_in_one_line_without_bubblewrap(tmp_path):
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"task_id": "HumanEval/0", "completion": "    return False\\n"}\n')
    env = {**os.environ, "PATH": "/nonexistent", "PYTHONPATH": str(REPO)}
    p = subprocess.run([str(REPO / ".venv" / "bin" / "evolve"), "verify", "--humaneval", "--samples", str(samples)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bubblewrap (bwrap) is not installed" in lines[0], p.stderr


def test_6_setup_says_it_cannot_install_bubblewrap_when_not_root():
    # A PATH without bwrap, run as uid 65534 (pytest's tmp_path is not reachable for that uid).
    bins = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        bins.chmod(0o755)
        for tool in ("id", "grep", "cat", "bash", "dirname"):
            (bins / tool).symlink_to(shutil.which(tool))
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", f"PATH={bins}",
                            "bash", str(REPO / "scripts" / "setup.sh"), "--sandbox-only"],
                           capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(bins)
    assert p.returncode == 0, p.stderr
    assert "setup: cannot install bubblewrap: not root" in p.stderr, p.stderr
