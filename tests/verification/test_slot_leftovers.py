"""Issue #24, class 5 (sibling sabotage through the slot): nothing an ended job left in its slot's shared
pipes, and no report about it, reaches the next job of the slot. Real sandbox servers; controls before
and after every saboteur, in the same batch.

Two races made a later correct sample fail, seen only under load (docs/sandbox.md, "Hostile text,
slots and limits", row "leftovers in a slot"): a job killed before its process had read its payload left the payload in the slot's pipe,
where the slot's next process read and ran it as the next sample; and a job's keeper report read after
the server's "done" for that job completed the slot's next job in its place. Here the same conditions
are made on purpose: the waiting job processes are stopped (SIGSTOP from here, as a loaded machine
leaves a process without the CPU) until a saboteur's deadline has fired, and a caller judges each
reply slowly (an ``on_reply`` that sleeps, as a loaded machine or a large result makes it)."""

from __future__ import annotations

import os
import signal
import time

from evolve.verification.sandbox.batch import _Batch
from evolve.verification.sandbox.client import ForkServer, SandboxConfig
from evolve.verification.sandbox_output import parse_reply

GOOD = "def f(a, b):\n    return a + b\n"
BAD = "def f(a, b):\n    return a - b\n"
FLOOD = "def f(a, b):\n    print('z' * (3 << 20))\n    return a + b\n"
BURN = "def f(a, b):\n    while True:\n        pass\n"
SLOW = "import time\ndef f(a, b):\n    time.sleep(0.04)\n    return a + b\n"


def _job(src: str, timeout: float = 2.0, pad: int = 0) -> dict:
    src = src + ("#" + "p" * pad + "\n" if pad else "")
    return {"mode": "run", "src": src, "entry": "f", "calls": [(1, 2)], "timeout": timeout, "cpu": 2}


def _good(r: dict) -> bool:  # the harness's own ack line never reaches the reply
    return r["lines"] == ["L ok", "R 0 ok 3", "END"] and not r["flags"] and not r["forged"] and r["exit"] == 0


def _bad(r: dict) -> bool:
    return r["lines"] == ["L ok", "R 0 ok -1", "END"] and not r["flags"] and not r["forged"] and r["exit"] == 0


def _controls(seq: list[str], rs: list) -> list:
    others = []
    for s, r in zip(seq, rs, strict=True):
        if s in (GOOD, SLOW):
            assert _good(r), r
        elif s == BAD:
            assert _bad(r), r
        else:
            others.append(r)
    return others


def _children(pid: int) -> list[int]:
    try:
        return [int(k) for t in os.listdir(f"/proc/{pid}/task")
                for k in open(f"/proc/{pid}/task/{t}/children").read().split()]  # noqa: SIM115
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] not in "ZX"  # noqa: SIM115
    except OSError:
        return False


def _job_processes(fs: ForkServer) -> list[int]:
    """The server's job processes (children of its keepers), seen from here: bwrap, its pid 1, the server.
    Once every live keeper holds one: a keeper forks its next process only after reporting the last one's
    end, so right after a reply (under load, for a while) a slot may have none yet; the process forked
    then would run unstopped, and a saboteur sent to it was not killed before reading its payload."""
    server = fs._proc.popen.pid
    while (kids := _children(server)) and len(kids) == 1:
        server = kids[0]
    deadline = time.monotonic() + 10
    while True:
        held = {k: _children(k) for k in kids if _alive(k)}  # a retired slot's keeper may be dying
        if all(held.values()) or time.monotonic() > deadline:
            return [j for js in held.values() for j in js]
        time.sleep(0.005)


class _Stall:
    """on_reply: stop every waiting job process (as a loaded machine leaves them without the CPU) once
    the job before a saboteur has replied, and let them go on once the saboteur has."""

    def __init__(self, fs: ForkServer, before: set[int]):
        self.fs, self.before, self.stopped = fs, before, []

    def __call__(self, i: int, r: dict) -> dict:
        self.resume()
        if i in self.before:
            self.stopped = _job_processes(self.fs)
            for pid in self.stopped:
                os.kill(pid, signal.SIGSTOP)
        return r

    def resume(self) -> None:
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped = []


def test_5_a_job_killed_before_reading_its_payload_never_hands_it_to_the_next_sample():
    # One job at a time over three slots, so a correct sample comes to the saboteur's slot after it.
    # Each saboteur's process is stopped, so its deadline (0.3 s) fires before it has read its payload:
    # a flood (the slot's next process read it whole and ran it: the next correct sample there failed
    # with OutputLimit and the flood's text, as seen under load) or 16 MB (the next process read the
    # first MiB, then waited for the rest, taking every later payload of the slot: each timed out).
    seq = [GOOD, BAD, "sab", GOOD, GOOD, GOOD, BAD, "sab", GOOD, GOOD, GOOD, GOOD, BAD]
    sabs = iter([_job(FLOOD, timeout=0.3), _job(FLOOD, timeout=0.3, pad=16_000_000)])
    fs = ForkServer(SandboxConfig(jobs=1))
    stall = _Stall(fs, {i - 1 for i, s in enumerate(seq) if s == "sab"})
    try:
        fs.ready()
        rs = fs.run([next(sabs) if s == "sab" else _job(s) for s in seq], stall)
    finally:
        stall.resume()
        fs.close()
    for r in _controls(seq, rs):
        assert r["killed"] and r["timeout"] and not r["lines"] and not r["flags"], r


def _idle_keepers(fs: ForkServer) -> int:
    server = fs._proc.popen.pid
    while (kids := _children(server)) and len(kids) == 1:
        server = kids[0]
    return sum(1 for k in kids if _alive(k) and not _children(k))


def test_5_a_payload_left_in_a_slot_is_read_by_no_next_process_before_the_retire(monkeypatch):
    # The retire reaches the server only after the keeper's report went to the parent and back; in between
    # the keeper used to fork the slot's next process, which read the payload left there and ran it,
    # unwatched (the flood's output then filled the saboteur's own reply). Here the parent sends its retire
    # 0.5 s late (as a descheduled parent does): meanwhile the saboteur's keeper must fork nothing (every
    # other keeper holds its stopped job process, so exactly one keeper is idle).
    seq = [GOOD, BAD, "sab", GOOD, BAD]
    fs = ForkServer(SandboxConfig(jobs=1))
    stall, idle, send = _Stall(fs, {1}), [], _Batch._send

    def late_retire(self, msg):
        if "retire" in msg:
            time.sleep(0.5)
            idle.append(_idle_keepers(fs))
        send(self, msg)

    monkeypatch.setattr(_Batch, "_send", late_retire)
    try:
        fs.ready()
        rs = fs.run([_job(FLOOD, timeout=0.3) if s == "sab" else _job(s) for s in seq], stall)
    finally:
        stall.resume()
        fs.close()
    (sab,) = _controls(seq, rs)
    assert sab["killed"] and sab["timeout"] and not sab["lines"] and not sab["flags"] and not sab["out"], sab
    assert idle == [1], idle


def test_5_an_end_known_only_from_the_server_s_done_keeps_no_ack_line():
    # A keeper that does not answer the server's kill (stopped here, as a starved one under load) is
    # killed with its job 1 s later, and the job is completed from the server's own "done": no token to
    # match. The harness's ack line, sent in the job's first flush, must not reach the reply: the reply
    # parser reads any "P" line as a forged result (a hack flag on an honest, slow sample).
    seq = [GOOD, "hang"]
    fs = ForkServer(SandboxConfig(jobs=1))
    keepers: list[int] = []

    def stop_keepers(i, r):
        if i == 0:
            _job_processes(fs)  # every keeper has reported and forked its next process
            server = fs._proc.popen.pid
            while (kids := _children(server)) and len(kids) == 1:
                server = kids[0]
            keepers.extend(kids)
            for pid in kids:
                os.kill(pid, signal.SIGSTOP)
        return r

    try:
        fs.ready()
        hang = "import time\ndef f(a, b):\n    time.sleep(30)\n"
        rs = fs.run([_job(GOOD), _job(hang, timeout=0.3)], stop_keepers)
    finally:
        for pid in keepers:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        fs.close()
    (hung,) = _controls(seq, rs)
    assert hung["killed"] and hung["timeout"] and hung["lines"] == ["L ok"] and not hung["flags"], hung
    assert parse_reply(hung, 1).flags == [] and len(keepers) == 3, (parse_reply(hung, 1).flags, keepers)


def test_5_lines_from_a_process_other_than_the_reported_one_never_reach_a_reply(monkeypatch):
    # The parent descheduled between a saboteur's "run" and its payload (1.5 s here) past its deadline
    # (0.3 s): the waiting process is killed with the pipe still empty, so its keeper forks the next one,
    # which then reads the payload and runs it. When the report of the killed process is read late (0.5 s
    # here), that next process's lines (its own ack among them) are in the pipe: none of them may reach
    # the reply, which the keeper reported for a process that never acked (the slot is retired).
    seq = [GOOD, "sab", GOOD, BAD]
    fs = ForkServer(SandboxConfig(jobs=1))
    write, reports, late = _Batch._write, _Batch._reports, []

    def late_write(self, k):
        if not late and b"3 << 20" in self.running[k].data:
            late.append(k)
            time.sleep(1.5)
        write(self, k)

    def late_reports(self):
        time.sleep(0.5)
        reports(self)

    monkeypatch.setattr(_Batch, "_write", late_write)
    monkeypatch.setattr(_Batch, "_reports", late_reports)
    try:
        fs.ready()
        rs = fs.run([_job(FLOOD, timeout=0.3) if s == "sab" else _job(s) for s in seq])
    finally:
        fs.close()
    (sab,) = _controls(seq, rs)
    # Its output pipe may hold the next process's flood (a killed reply, maybe flagged OutputLimit then,
    # not "timeout"): the job's own code; what must not be there is any line of that other process.
    assert sab["killed"] and sab["lines"] == [] and late, sab


def test_5_a_report_read_after_its_done_never_completes_the_next_job():
    # Two at a time; four flooders retire four of six slots, so a freed slot is soon dispatched again.
    # Then quick samples, each reply judged for 10 ms (with the old read order, up to 17 of 41 failed
    # here: completed by the late report of the slot's previous job, or reading its output); then 40 ms
    # samples, each judged for 0.1 s: while one reply is judged the other job ends and the next is
    # dispatched; the next step finds both pipes ready and judges that report for 0.1 s, and meanwhile
    # the new job ends: its report and done arrive between the parent's reads of the two pipes. Every
    # job must be completed from its own keeper's report: no slot is retired for a completion without
    # one (the defence against a late report), so the server is never replaced.
    seq = [GOOD, BAD] + [FLOOD] * 4 + [GOOD] * 30 + [SLOW] * 12 + [GOOD, BAD]
    fs = ForkServer(SandboxConfig(jobs=2))

    def judge(i, r):
        time.sleep(0.1 if seq[i] == SLOW else 0.01)
        return r

    try:
        fs.ready()
        server = fs._proc.popen.pid
        rs = fs.run([_job(s) for s in seq], judge)
        assert fs._proc.popen.pid == server and len(fs._proc.retired) == 4, fs._proc.retired
    finally:
        fs.close()
    for r in _controls(seq, rs):
        assert "OutputLimit" in r["flags"], r


def _descendants(pid: int) -> int:
    kids = _children(pid)
    return len(kids) + sum(_descendants(k) for k in kids)


def _settle(pid: int, want: int) -> int:
    deadline = time.monotonic() + 5
    while (n := _descendants(pid)) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return n


def test_5_a_retired_slot_runs_nothing_more():
    # A payload left whole in a retired slot's pipe (a burner's, here) would be run there by the slot's
    # next process, unwatched (no deadline covers it), taking CPU from every later sample; and the
    # slot's keeper would keep forking. The server kills the keeper and its job process instead.
    seq = [GOOD, "sab", GOOD, BAD]
    fs = ForkServer(SandboxConfig(jobs=1))
    stall = _Stall(fs, {0})
    try:
        fs.ready()
        pid = fs._proc.popen.pid
        full = _settle(pid, 2 + 2 * 3)
        assert full == 8, full  # bubblewrap's pid 1, the server; a keeper and a job process per slot
        rs = fs.run([_job(BURN, timeout=0.3) if s == "sab" else _job(s) for s in seq], stall)
        (sab,) = _controls(seq, rs)
        assert sab["killed"] and len(fs._proc.retired) == 1, (sab, fs._proc.retired)
        assert _settle(pid, full - 2) == full - 2  # the retired slot's keeper and job process are gone
    finally:
        stall.resume()
        fs.close()
