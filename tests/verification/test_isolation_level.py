"""Where bubblewrap works on this machine, the verifier must actually use it.

A checkout or venv under /tmp (CI clones, say) is hidden by the sandbox's private /tmp; the
server must still start inside bubblewrap rather than silently fall back to weaker isolation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import evolve_zygote
import pytest

from evolve.verification import Verifier


def _bwrap_works() -> bool:
    if not shutil.which("bwrap"):
        return False
    probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "true"],
                           capture_output=True, timeout=20)
    return probe.returncode == 0


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap is not installed or cannot create namespaces here")
def test_full_isolation_is_used_where_bubblewrap_works():
    with Verifier(jobs=1) as v:
        assert v.isolation == "bwrap+seccomp"


REPO = Path(__file__).resolve().parents[2]


def _evolve(args: list[str], path: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`evolve ARGS` with only ``path`` on PATH (forked from a warm parent: tests/evolve_zygote.py)."""
    return evolve_zygote.run(args, {**os.environ, "PATH": path, "PYTHONPATH": str(REPO)}, timeout=timeout)


def test_the_loop_refuses_weak_isolation_unless_asked_and_records_the_level(tmp_path):
    """No bubblewrap on PATH: `evolve run` stops in one line before creating the run; with
    --allow-weak-sandbox it runs, and `evolve runs` / `evolve show` report the level it ran at."""
    bins = tmp_path / "bin"
    bins.mkdir()
    (bins / "git").symlink_to(shutil.which("git"))
    db = f"sqlite:///{tmp_path / 'l.db'}"
    run = ["run", "--config", "configs/ci.toml", "--generations", "0", "--db", db, "--name", "weak"]
    p = _evolve(run, str(bins))
    lines = [ln for ln in p.stderr.splitlines() + p.stdout.splitlines() if ln.startswith("error")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert len(lines) == 1 and "bubblewrap (bwrap) is not installed" in lines[0], p.stderr[-2000:]
    listed = _evolve(["runs", "--db", db, "--json"], str(bins))
    assert listed.returncode != 0 or json.loads(listed.stdout) == []  # nothing was written
    p = _evolve([*run, "--allow-weak-sandbox"], str(bins))
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(_evolve(["runs", "--db", db, "--json"], str(bins)).stdout)
    assert [r["verifier_isolation"] for r in rows] == ["seccomp"]
    shown = json.loads(_evolve(["show", "weak:0", "--db", db, "--json"], str(bins)).stdout)
    assert shown["verifier_isolation"] == "seccomp"


VIEW = """import os, sysconfig
def f(i):
    if i == 0:
        return sorted(set(os.listdir("/")) - {"usr", "lib", "lib64", "lib32", "libx32", "bin", "sbin", "etc", "dev",
                                              "tmp", "root", "proc"})  # /proc: an empty folder (below)
    if i == 1:
        return sorted(os.listdir("/dev"))
    if i == 2:
        return [p for p in ("/proc/self", "/etc/shadow", "/etc/passwd", "/home", %(repo)r) if os.path.exists(p)]
    if i == 3:
        return (os.listdir("/tmp") + os.listdir("/proc") + os.listdir("/usr/local") + os.listdir("/usr/share")
                + os.listdir(sysconfig.get_paths()["purelib"]))
    if i == 4:
        return [p for p in ("/", "/tmp", "/dev", "/usr") if os.access(p, os.W_OK)]
    if i == 5:
        return os.getpid()
    return sorted(os.listdir("/etc"))
"""


def test_the_view_holds_only_the_interpreter_and_system_libraries():
    """What a job sees, checked from inside: each probe's expected value is the claim in docs/sandbox.md."""
    from evolve.verification import Task, TestCase

    expect = [[], ["full", "null", "random", "urandom", "zero"], [], [], [], 1, ["ld.so.cache"]]
    task = Task("view", "", "f", hidden_tests=tuple(TestCase((i,), e) for i, e in enumerate(expect)))
    with Verifier(jobs=1) as v:
        r = v.verify(task, VIEW % {"repo": str(REPO)})
    assert r.passed, r.trace
