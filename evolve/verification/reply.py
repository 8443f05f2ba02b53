"""Parse and validate what the sandbox sent back. The parent trusts structure, never exit codes.

Every result line must carry the job's nonce (the server drops and counts those that do not),
test results must come one per test, in order, and the ``END`` sentinel must come last: a job
that stops without it exited before its tests finished (``hack: exit-before-tests``) unless it
was killed for time, output or a crash, which are ordinary failures.
"""

from __future__ import annotations

import ast
import signal
from dataclasses import dataclass, field

from evolve.verification.sandbox.codec import decode


@dataclass
class Outcome:
    """One test's result as the parent sees it."""

    status: str  # "ok" (value is the plain result), "err" (error), "np" (non-plain), "missing"
    value: object = None
    error: tuple = ("", "", 0)  # (exception type, message, line) for "err"


@dataclass
class Reply:
    compile_error: str | None = None
    load_error: tuple | None = None  # the module raised while loading: (type, message, line)
    results: list[Outcome] = field(default_factory=list)
    weak_ok: bool | None = None  # weak path: check() passed / failed / did not finish
    weak_error: tuple | None = None
    flags: list[str] = field(default_factory=list)
    job_error: str | None = None  # "Timeout", "OutputLimit", "Crash", ... when the job did not finish
    job_message: str = ""
    time_s: float | None = None  # time spent in the tests (the perf stage)
    stdout: str = ""


def _tuple3(text: str) -> tuple:
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ("HarnessError", "unreadable error report", 0)
    if isinstance(v, tuple) and len(v) == 3:
        return (str(v[0])[:80], str(v[1])[:300], v[2] if isinstance(v[2], int) else 0)
    return ("HarnessError", "unreadable error report", 0)


def _job_error(raw: dict, reply: Reply) -> None:
    if raw.get("server_died"):
        reply.job_error, reply.job_message = "SandboxError", "the sandbox server died twice on this sample"
    elif "OutputLimit" in raw.get("flags", ()):
        reply.job_error, reply.job_message = "OutputLimit", f"printed over {raw.get('out_bytes', 0)} bytes"
    elif "ResultLimit" in raw.get("flags", ()):
        reply.job_error, reply.job_message = "OutputLimit", "results too large"
    elif raw.get("timeout") or raw.get("signal") in (signal.SIGXCPU, signal.SIGKILL):
        reply.job_error, reply.job_message = "Timeout", "time limit exceeded"
    elif raw.get("signal"):
        reply.job_error = "Crash"
        reply.job_message = f"killed by signal {raw['signal']}"
    else:  # exited on its own before the sentinel: sys.exit in a finaliser, os._exit, kill...
        reply.job_error, reply.job_message = "hack", "exited before the tests finished"
        reply.flags.append("hack: exit-before-tests")


def parse_reply(raw: dict, n_tests: int) -> Reply:  # noqa: C901 - one branch per line kind
    r = Reply(stdout=raw.get("out", "")[:500])
    if raw.get("compile_error"):
        r.compile_error = raw["compile_error"]
        kind = r.compile_error.split(":", 1)[0]
        r.load_error = (kind, "the program does not compile", 0)
        r.results = [Outcome("missing")] * n_tests
        return r
    results: list[Outcome | None] = [None] * n_tests
    ended, expect = False, 0
    for line in raw.get("lines", ()):
        if ended:
            r.flags.append("hack: forged-result")  # nothing may follow the sentinel
            break
        kind, _, rest = line.partition(" ")
        if kind == "F":
            if rest.startswith("hack: ") and rest not in r.flags:
                r.flags.append(rest[:60])
        elif kind == "L":
            if rest != "ok":
                r.load_error = _tuple3(rest[4:]) if rest.startswith("err ") else ("HarnessError", rest[:80], 0)
        elif kind == "R":
            idx, _, body = rest.partition(" ")
            if not idx.isdigit() or int(idx) != expect or expect >= n_tests:
                r.flags.append("hack: forged-result")
                break
            expect += 1
            status, _, payload = body.partition(" ")
            if status == "ok":
                try:
                    results[int(idx)] = Outcome("ok", decode(payload))
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    results[int(idx)] = Outcome("err", error=("HarnessError", "unreadable result", 0))
            elif status == "np":
                results[int(idx)] = Outcome("np", error=("NonPlainReturn", payload.strip("'\"")[:80], 0))
            else:
                results[int(idx)] = Outcome("err", error=_tuple3(payload))
        elif kind == "W":
            r.weak_ok = rest == "ok"
            if rest.startswith("err "):
                r.weak_error = _tuple3(rest[4:])
        elif kind == "T":
            try:
                r.time_s = float(rest)
            except ValueError:
                pass
        elif kind == "END":
            ended = True
        else:
            r.flags.append("hack: forged-result")
            break
    if raw.get("forged"):
        r.flags.append("hack: forged-result")
    for f in raw.get("flags", ()):
        if f.startswith("hack: "):
            r.flags.append(f)
    if not ended:
        _job_error(raw, r)
    r.results = [o or Outcome("missing") for o in results]
    r.flags = list(dict.fromkeys(r.flags))
    return r
