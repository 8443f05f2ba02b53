"""Test support: `evolve` CLI processes forked from warm parents instead of started cold.

Each `python -m evolve` that loads a model spends ~6 s of CPU importing torch, transformers and peft
before it does anything, and the loop's tests start about a hundred of them (on 2 cores, most of
the suite's time). Here a parent ("zygote") imports those once and forks one child per command. The
child is a real, separate process running the real CLI (``evolve.cli.main``) with the command's
argv, environment, working directory and stdout/stderr; it leads its own session, so
``os.killpg(pid, 9)`` kills it and what it started, as with ``start_new_session=True``.

What differs from a cold start, and how it is kept honest:
- Python's string-hash seed is inherited from the zygote. Hash-order bugs (a set iterated in a
  replay in another order than in the run) show up only across seeds, so there are two zygotes, each
  with its own random seed, taken in turn: a run and its replay usually get different seeds.
- ``random`` is reseeded from the OS in each child; torch's generator starts from its fixed default
  in every process anyway; nothing but imports ran in the zygote.
- the child exits without tearing down the imported modules (``_exit_as_python_would``): same status,
  output, atexit handlers and thread joins as a normal exit.
- ``EVOLVE_TEST_FORK=0`` starts every command cold (``python -m evolve``), for a full-fidelity run.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRELOAD = ("torch", "transformers", "peft", "sqlalchemy", "alembic", "typer", "evolve.cli",
           "evolve.loop.runner", "evolve.policy.policy", "evolve.policy.model_io", "evolve.policy.updater")


# ---- the zygote (its own process: `python tests/evolve_zygote.py SOCKET`) ---------------------------

def _serve(path: str) -> dict:
    """Import, listen, fork a child per request. Returns only in a child: its request."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401 - resolve the lazy modules

    # What the imports made goes to the collector's permanent generation (gc.freeze's documented use before
    # fork without exec): a child's collections no longer walk it and write its pages. Measured: a forked
    # child's exit 2.4 s -> 0.7 s.
    gc.collect()
    gc.freeze()

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    children: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select_retry([listener, wake_r, sys.stdin.fileno()])
        if sys.stdin.fileno() in ready and not os.read(sys.stdin.fileno(), 1 << 10):
            os._exit(0)  # the test worker is gone
        if wake_r in ready:
            os.read(wake_r, 1 << 10)
            _reap(children)
        if listener in ready:
            conn, _ = listener.accept()
            data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for sock in (listener, *children.values()):
                    sock.close()
                os.close(wake_r)
                os.close(wake_w)
                os.setsid()  # before the pid is reported, as Popen(start_new_session=True) returns after it
                conn.sendall(f"{os.getpid()}\n".encode())
                conn.close()
                return {**json.loads(data), "fds": fds}
            for fd in fds:
                os.close(fd)
            children[pid] = conn


def select_retry(fds):
    import select

    while True:
        try:
            return select.select(fds, [], [])
        except InterruptedError:
            continue


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()


def _become(req: dict) -> None:
    """In the child: the command's session, stdio, directory, environment and argv."""
    import random

    out, err = req["fds"]
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (devnull, out, err):
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    random.seed()
    sys.argv = ["evolve", *req["args"]]
    sys.path[0] = req["cwd"]  # as `python -m evolve` run from there


def _exit_as_python_would(main) -> None:
    """Run ``main`` and end the process as the interpreter would, less module teardown.

    The exit status, traceback and message of an uncaught exception or ``SystemExit`` are Python's; non-daemon
    threads are joined and atexit handlers run (weakref finalizers, logging, multiprocessing) as at a normal
    exit. What is skipped is tearing down the modules the zygote imported: ~0.5 s of a forked child's exit
    even with the heap frozen, and nothing an `evolve` command relies on (its files and database rows are
    written before it returns; a kill -9 at any moment is tested to lose nothing committed)."""
    import atexit
    import threading
    import traceback

    code = 0
    try:
        main()
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        raise  # Python's own exit for it (status -SIGINT)
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports it
        traceback.print_exc()
        code = 1
    threading._shutdown()  # joins non-daemon threads, as the interpreter does before atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


# ---- the test side -----------------------------------------------------------------------------------

class ForkedProcess:
    """A Popen-like handle on a forked `evolve` command (pid, poll, wait, returncode, kill)."""

    def __init__(self, conn: socket.socket):
        self._conn, self._buf, self.returncode = conn, b"", None
        self.pid = int(self._line(None))

    def _line(self, timeout: float | None) -> str | None:
        self._conn.settimeout(timeout)
        while b"\n" not in self._buf:
            try:
                chunk = self._conn.recv(64)
            except (TimeoutError, BlockingIOError):
                return None
            if not chunk:
                raise RuntimeError("the evolve zygote died")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def poll(self) -> int | None:
        if self.returncode is None:
            line = self._line(0.0)
            if line is not None:
                self.returncode = int(line)
                self._conn.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            line = self._line(timeout)
            if line is None:
                raise subprocess.TimeoutExpired("evolve", timeout)
            self.returncode = int(line)
            self._conn.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Zygote:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="evolve-zygote-")
        self.path = os.path.join(self.dir, "sock")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        env.pop("PYTHONHASHSEED", None)  # each zygote its own random hash seed
        self.proc = subprocess.Popen([sys.executable, __file__, self.path], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ready = threading.Event()
        threading.Thread(target=self._await_ready, daemon=True).start()

    def _await_ready(self) -> None:
        if self.proc.stdout.readline().strip() == b"ready":
            self.ready.set()

    def spawn(self, args, env: dict, cwd: str, out_fd: int, err_fd: int) -> ForkedProcess:
        deadline = time.monotonic() + 300
        while not self.ready.wait(1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the evolve zygote did not start (exit {self.proc.poll()})")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        socket.send_fds(conn, [json.dumps({"args": list(args), "env": env, "cwd": str(cwd)}).encode()],
                        [out_fd, err_fd])
        return ForkedProcess(conn)


_ZYGOTES: list[_Zygote] = []
_TURN = [0]
_LOCK = threading.Lock()


def _forking() -> bool:
    return os.environ.get("EVOLVE_TEST_FORK", "1") != "0"


def _next_zygote() -> _Zygote:
    with _LOCK:
        if not _ZYGOTES:
            _ZYGOTES.extend([_Zygote(), _Zygote()])
        _TURN[0] += 1
        return _ZYGOTES[_TURN[0] % len(_ZYGOTES)]


def popen(args, env: dict, cwd=REPO, log: Path | None = None):
    """`evolve ARGS` started in its own session (stdout and stderr to ``log``, else discarded)."""
    if not _forking():
        out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the child owns it from here
        return subprocess.Popen([sys.executable, "-m", "evolve", *args], cwd=cwd, stdout=out,
                                stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                                start_new_session=True, env=env)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if log else os.open(os.devnull, os.O_WRONLY)
    try:
        return _next_zygote().spawn(args, env, cwd, fd, fd)
    finally:
        os.close(fd)


def run(args, env: dict, cwd=REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    """`evolve ARGS` to completion, output captured (as ``subprocess.run(..., capture_output=True, text=True)``)."""
    argv = [sys.executable, "-m", "evolve", *args]
    if not _forking():
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = _next_zygote().spawn(args, env, cwd, out.fileno(), err.fileno())
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
            raise subprocess.TimeoutExpired(argv, timeout) from None
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, code, out.read().decode("utf-8", "replace"),
                                           err.read().decode("utf-8", "replace"))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    request = _serve(sys.argv[1])
    _become(request)  # from here on this process is the command
    del request
    from evolve.cli import main

    _exit_as_python_would(main)
