"""The parent side of the fork-server: start it isolated, feed it jobs, restart it if it dies.

The server is a fresh ``python -I -S -B`` process started through an absolute interpreter path,
never forked from the caller (which may have torch imported: forking 500 MB costs 24 ms a job).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from evolve.errors import EvolveError

_HERE = Path(__file__).parent
_BOOT = "import sys;exec(compile(sys.argv[1],'<evolve-harness>','exec'))"


def server_source() -> str:
    """codec + harness + server as one stdlib-only program (run with -I -S: no package imports)."""
    return "\n".join((_HERE / name).read_text() for name in ("codec.py", "harness.py", "server.py"))
_warned: set[str] = set()


@dataclass(frozen=True)
class SandboxConfig:
    """How jobs are isolated. Defaults suit the gym: small pure functions, many a minute."""

    jobs: int = 2  # concurrent forked jobs
    isolation: str = "auto"  # "auto" (best available), "bwrap", "seccomp" (no namespaces), "rlimits"
    out_cap: int = 1 << 20  # bytes of stdout+stderr before the job is killed (first 2 KiB kept)
    res_cap: int = 8 << 20  # bytes of structured results before the job is killed
    fsize: int = 16 << 20  # RLIMIT_FSIZE: largest file a job may write in its tmp
    tmp_size: int = 256 << 20  # size of the private tmpfs under bubblewrap
    drop_uid: bool = True  # run jobs as uid 65534 (nobody) where we can
    hide: tuple[str, ...] = ()  # paths masked in the sandbox and flagged when opened
    hide_patterns: tuple[str, ...] = ("HumanEval.jsonl",)  # path substrings flagged when opened
    extra: dict = field(default_factory=dict, hash=False, compare=False)


def _seccomp_path() -> str | None:
    try:
        import pyseccomp
    except Exception:  # noqa: BLE001 - libseccomp missing: the weaker isolation is reported
        return None
    return pyseccomp.__file__


def _interpreter() -> str:
    # The real binary, not a venv shim: the venv folder may be masked inside the sandbox.
    return os.path.realpath(sys.executable)


class ForkServer:
    """One long-lived sandboxed server. ``run(jobs)`` returns one reply per job, same order."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.isolation = "none"
        self._proc: subprocess.Popen | None = None
        self._pending: tuple[str, subprocess.Popen | None] | None = None  # launched, hello not read yet
        self._lock = threading.Lock()
        self._next_id = 0
        self.restarts = 0
        self.last_stats: dict | None = None  # {"server_cpu_s", "jobs_cpu_s"} of the last closed server

    # -- lifecycle ---------------------------------------------------------------------------------
    def _server_cfg(self) -> dict:
        c = self.config
        hide = [p for p in c.hide if p] + list(c.hide_patterns)
        return {"jobs": c.jobs, "out_cap": c.out_cap, "res_cap": c.res_cap, "fsize": c.fsize,
                "drop_uid": c.drop_uid, "hide": hide, "seccomp": None}

    def _bwrap_prefix(self) -> list[str]:
        c = self.config
        empty = Path(os.environ.get("TMPDIR", "/tmp")) / f"evolve-empty-{os.getuid()}"
        if not empty.exists():
            empty.write_bytes(b"")
        cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
               "--size", str(c.tmp_size), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
        if c.drop_uid:
            cmd += ["--uid", "65534", "--gid", "65534"]
        interp = _interpreter()
        seccomp = _seccomp_path() or ""
        # The private /tmp hides a venv that lives under /tmp (a CI clone, say): bind back,
        # read-only, the seccomp module the server imports from there.
        if seccomp and os.path.realpath(seccomp).startswith("/tmp/"):
            cmd += ["--ro-bind", os.path.realpath(seccomp), os.path.realpath(seccomp)]
        for p in c.hide:
            rp = os.path.realpath(p)
            if not os.path.exists(rp) or interp.startswith(rp) or seccomp.startswith(rp) or rp == "/":
                continue
            cmd += ["--tmpfs", rp] if os.path.isdir(rp) else ["--ro-bind", str(empty), rp]
        return cmd + ["--chdir", "/tmp", "--"]

    def _launch(self, mode: str) -> subprocess.Popen | None:
        cfg = self._server_cfg()
        if mode in ("bwrap", "seccomp"):
            cfg["seccomp"] = _seccomp_path()
        prefix = self._bwrap_prefix() if mode == "bwrap" else []
        cfg["in_bwrap"] = mode == "bwrap"
        cmd = prefix + [_interpreter(), "-I", "-S", "-B", "-c", _BOOT, server_source(), json.dumps(cfg)]
        try:
            return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    cwd="/", close_fds=True, start_new_session=True)
        except OSError:
            return None

    def _hello(self, proc: subprocess.Popen | None, mode: str) -> bool:
        """Read the server's first line; False (and the process killed) if it is not usable."""
        if proc is None:
            return False
        try:
            hello = json.loads(proc.stdout.readline())
        except ValueError:
            hello = {}
        if hello.get("ready") and (mode == "rlimits" or hello.get("seccomp")):
            return True
        proc.kill()
        proc.wait()
        proc.stdout.close()
        return False

    def _modes(self) -> list[str]:
        want = self.config.isolation
        modes = ["bwrap", "seccomp", "rlimits"] if want == "auto" else [want]
        if want == "auto" and not shutil.which("bwrap"):
            modes.remove("bwrap")
        return modes

    def start(self) -> None:
        """Launch the server without waiting for it: the caller can plan its jobs meanwhile."""
        if self._proc is None and self._pending is None:
            mode = self._modes()[0]
            self._pending = (mode, self._launch(mode))

    def ready(self) -> None:
        """Wait for a usable server, falling back to weaker isolation levels under "auto"."""
        if self._proc is not None:
            return
        self.start()
        first_mode, first_proc = self._pending
        self._pending = None
        want = self.config.isolation
        for mode in self._modes():
            proc = first_proc if mode == first_mode else self._launch(mode)
            if not self._hello(proc, mode):
                continue
            self._proc = proc
            self.isolation = {"bwrap": "bwrap+seccomp", "seccomp": "seccomp", "rlimits": "rlimits"}[mode]
            if want == "auto" and self.isolation != "bwrap+seccomp" and self.isolation not in _warned:
                _warned.add(self.isolation)
                warnings.warn(f"evolve sandbox: bubblewrap unavailable, using weaker isolation "
                              f"'{self.isolation}' (see docs/sandbox.md)", RuntimeWarning, stacklevel=3)
            return
        raise EvolveError(f"cannot start the verification sandbox (isolation={want!r})")

    def close(self) -> None:
        if self._pending is not None:
            _, pending = self._pending
            self._pending = None
            if pending is not None:
                pending.kill()
                pending.wait()
                pending.stdout.close()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            last = proc.stdout.readline()  # the server's CPU report, sent when its input closes
            self.last_stats = json.loads(last).get("stats") if last else None
        except (ValueError, OSError, AttributeError):
            self.last_stats = None
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()

    def __del__(self):  # a forgotten server must not linger
        try:
            for proc in (self._proc, self._pending[1] if self._pending else None):
                if proc is not None:
                    proc.kill()
        except Exception:  # noqa: BLE001
            pass

    # -- jobs ----------------------------------------------------------------------------------------
    def run(self, jobs: list[dict]) -> list[dict]:
        """Run jobs (dicts without "id"); one reply per job, same order. Restarts a dead server once."""
        with self._lock:
            replies = self._run_once(jobs)
            missing = [i for i, r in enumerate(replies) if r is None]
            if missing:  # the server died: restart and retry those jobs once
                self.restarts += 1
                self._kill()
                again = self._run_once([jobs[i] for i in missing])
                for i, r in zip(missing, again, strict=True):
                    replies[i] = r or {"server_died": True, "lines": [], "flags": []}
                if any(r is None for r in again):
                    self._kill()
            return replies

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc.stdout.close()
            self._proc = None

    def _run_once(self, jobs: list[dict]) -> list[dict | None]:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None
        self.ready()
        proc = self._proc
        ids = {}
        payload = []
        for i, job in enumerate(jobs):
            self._next_id += 1
            ids[self._next_id] = i
            payload.append(json.dumps({**job, "id": self._next_id}))
        data = ("\n".join(payload) + "\n").encode()

        def feed():
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()  # a thread: a large batch would otherwise deadlock on full pipes
        replies: list[dict | None] = [None] * len(jobs)
        left = len(jobs)
        while left:
            line = proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            i = ids.pop(msg.get("id"), None)
            if i is not None:
                replies[i] = msg
                left -= 1
        writer.join()
        return replies
