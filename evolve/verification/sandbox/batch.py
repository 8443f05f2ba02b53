"""One batch of jobs through one running server (the parent side of the slot protocol).

Dispatch to free slots (never more than ``jobs`` running), stream each payload into its slot's
pipe, read results and output under caps (killing a job beyond them), and complete each job from
its keeper's report or the server's own "done" (never from anything the job writes). See
client.py for the server's lifecycle and server.py for the other side.
"""

from __future__ import annotations

import json
import marshal
import os
import select
import time
from collections import deque

_KEEP_OUT = 2048  # bytes of a job's stdout/stderr kept for its trace


class _Job:
    __slots__ = ("index", "id", "nonce", "data", "deadline", "res", "out_head", "out_bytes", "flags", "killed", "t0")

    def __init__(self, index, id_, nonce, data, deadline):
        self.index, self.id, self.nonce, self.data, self.deadline = index, id_, nonce, data, deadline
        self.res, self.out_head, self.out_bytes, self.flags, self.killed = bytearray(), bytearray(), 0, [], False
        self.t0 = time.monotonic()


class _Batch:
    """One batch through one server: dispatch to free slots, stream payloads, collect, enforce caps."""

    def __init__(self, owner, proc, jobs: list[dict], keep):  # owner: client.ForkServer, proc: its _Proc
        self.owner, self.proc, self.jobs, self.cfg, self.keep = owner, proc, jobs, owner.config, keep
        self.replies: list = [None] * len(jobs)
        self.pending = deque(range(len(jobs)))
        self.free = deque(k for k in range(len(proc.slots)) if k not in proc.retired and k not in proc.draining)
        self.running: dict[int, _Job] = {}
        self.dead = False  # the server died or hung (the jobs it left count one try each)
        self.exhausted = False  # every slot retired: a fresh server runs the rest, no try counted

    def add(self, job: dict) -> None:
        """A job added while the batch runs (ForkServer.submit): dispatched like the others."""
        self.jobs.append(job)
        self.replies.append(None)
        self.pending.append(len(self.jobs) - 1)

    def run(self) -> None:
        while (self.pending or self.running) and not self.dead and not self.exhausted:
            self._dispatch()
            if not self.exhausted:
                self._step()

    def _send(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.proc.ctl_w, data):]
        except OSError:
            self.dead = True

    def _dispatch(self) -> None:
        if self.pending and not self.free and not self.running and not self.proc.draining:
            self.exhausted = True  # every slot retired: a fresh server (fresh pipes) runs the rest
            return
        # A job counts as running until the server says it ended (never from anything the job writes:
        # a look-alike end marker would let more than `jobs` jobs run at once).
        while self.pending and self.free and not self.dead and len(self.running) < self.cfg.jobs:
            k, i = self.free.popleft(), self.pending.popleft()
            job = self.jobs[i]
            self.owner._next_id += 1
            nonce = os.urandom(12).hex()
            body = marshal.dumps({**job, "nonce": nonce, "limit": min(self.cfg.res_cap, job.get("limit", 1 << 62))})
            timeout = float(job.get("timeout", 3.0))
            run = _Job(i, self.owner._next_id, nonce, len(body).to_bytes(8, "little") + body,
                       time.monotonic() + timeout + self.cfg.grace_s)
            self.running[k] = run
            self._send({"run": k, "id": run.id, "timeout": timeout})  # before the payload: see server.py
            self._write(k)

    def _write(self, k: int) -> None:
        run = self.running[k]
        try:
            n = os.write(self.proc.slots[k][0], run.data)
            run.data = run.data[n:]
        except BlockingIOError:
            pass
        except OSError:
            run.data = b""

    def _step(self) -> None:
        now = time.monotonic()
        deadlines = [r.deadline for r in self.running.values()] + [d for _, d in self.proc.draining.values()]
        if any(d < now for d in deadlines):
            self.dead = True  # the server did not end a job, or reap its keeper, in time: stopped or stuck
            return
        wait = min(deadlines, default=now + 1) - now
        rl = [self.proc.ctl_r, self.proc.rep_r] + [fd for k in self.running for fd in self.proc.slots[k][1:]]
        wl = [self.proc.slots[k][0] for k, r in self.running.items() if r.data]
        try:
            r, w, _ = select.select(rl, wl, [], max(0.0, wait))
        except InterruptedError:
            return
        slot_of = {fd: k for k in self.running for fd in self.proc.slots[k]}
        for fd in w:
            self._write(slot_of[fd])
        for fd in r:
            if fd != self.proc.ctl_r and fd in slot_of:
                self._drain(slot_of[fd])
        msgs: list[dict] | None = []
        if self.proc.ctl_r in r:
            msgs = self.proc.lines(0)
            if msgs is None:
                self.dead = True
                return
        # Reports after the server's messages, whatever select said: a keeper writes its report before the
        # server can send that job's "done", so every report of a "done" read above is in the pipe now. Read
        # in the other order (one select, then the report pipe, then ctl: under load, or with a slow on_reply,
        # a job's report and done both arrived in between), the job was completed from its done and its
        # report, read later, completed the slot's next job in its place (test_slot_leftovers.py).
        if self.proc.rep_r in r or msgs:
            self._reports()
        for m in msgs:
            self._done(m)

    def _reports(self) -> None:
        """Keepers' reports: each completes its slot's running job (the server's own "done" for it comes
        later and frees the slot); one for a slot with no job (a process that died before one) is ignored."""
        for k, code, cpu, stopped, orphans, tok in self.proc.reports():
            run = self.running.get(k)
            if run is not None:
                self.proc.draining[k] = (run.id, time.monotonic() + self.cfg.grace_s)
                self._complete(k, {"exit": code if code < 128 else None, "signal": code - 128 if code > 128 else None,
                                   "timeout": stopped and not run.flags, "killed": stopped, "cpu_s": cpu,
                                   "orphans": orphans, "wall_s": time.monotonic() - run.t0}, tok)

    def _drain(self, k: int) -> None:
        run, (_, res, out) = self.running[k], self.proc.slots[k]
        for fd in (res, out):
            while True:
                try:
                    chunk = os.read(fd, 1 << 16)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    break
                if fd == res:
                    if len(run.res) <= self.cfg.res_cap:
                        run.res += chunk
                    over = len(run.res) > self.cfg.res_cap and "ResultLimit"
                else:
                    run.out_bytes += len(chunk)
                    if len(run.out_head) < _KEEP_OUT:
                        run.out_head += chunk[: _KEEP_OUT - len(run.out_head)]
                    over = run.out_bytes > self.cfg.out_cap and "OutputLimit"
                if over and over not in run.flags:
                    run.flags.append(over)
                    self._send({"kill": k, "id": run.id, "why": over})

    def _done(self, msg: dict) -> None:
        """The server's "done": it reaped the slot's keeper and prepared the slot's next process. A job
        still running here lost its keeper before the keeper reported it: completed, and its slot retired."""
        k = msg.get("done")
        if isinstance(k, int) and k in self.proc.draining and self.proc.draining[k][0] == msg.get("id"):
            del self.proc.draining[k]  # its job was completed from the keeper's report
            if k not in self.proc.retired:
                self.free.append(k)
            return
        run = self.running.get(k) if isinstance(k, int) else None
        if run is None or msg.get("id") != run.id:
            return  # a prepared child that died before it had a job: the slot stays usable
        self._complete(k, msg)
        if k not in self.proc.retired:
            self.free.append(k)

    def _complete(self, k: int, msg: dict, tok: str | None = None) -> None:
        """A job ended (by its keeper's report, naming the ended process's token, or the server's done):
        drain its pipes, make its reply, and retire the slot unless its pipes are surely empty of it."""
        run = self.running[k]
        self._drain(k)
        del self.running[k]
        lines, forged = [], 0
        prefix = run.nonce + " "
        for raw in bytes(run.res).decode("utf-8", "replace").split("\n"):
            if raw.startswith(prefix):
                lines.append(raw[len(prefix):])
            elif raw:
                forged += 1
        ack = f"P {tok}" if tok is not None else None
        acked = ack is not None and ack in lines
        if acked:
            lines.remove(ack)  # the harness's, not a result line; any other "P" line stays (forged)
        elif tok is not None:
            # The reported process never acked, so it wrote none of these (its ack leads its first write):
            # another process of the slot read the payload left behind and ran it (server.py's keeper
            # forks none when it sees the bytes; this is the rest: a payload written after the kill).
            lines = []
        elif lines[:1] and lines[0].startswith("P ") and len(lines[0]) == 26:
            del lines[0]  # ended known only from the server's done: the harness's ack leads, never a result
        # The slot's pipes are shared by all its job processes. Reused only when (1) the keeper reported
        # the job's process reaped (pid 1 of its namespace: every writer of its pipes is gone, so the
        # drain above got all its bytes), (2) that same process read the payload whole (its ack, with the
        # token the keeper gave it and this job's nonce: a job killed before reading its payload left it
        # in the pipe, where the slot's next process ran it as the next sample, with its output), (3) no
        # cap was hit and no process outlived it. Else retired, and the server kills what it holds.
        if not acked or run.data or msg.get("orphans") or any(f in ("ResultLimit", "OutputLimit") for f in run.flags):
            self.proc.retired.add(k)
            self._send({"retire": k})
        flags = list(run.flags) + (["hack: orphan-process"] if msg.get("orphans") else [])
        self.replies[run.index] = self.keep(run.index, {
            "lines": lines, "forged": forged, "flags": flags, "out": bytes(run.out_head).decode("utf-8", "replace"),
            "out_bytes": run.out_bytes, "exit": _int_or_none(msg.get("exit")), "signal": _int_or_none(msg.get("signal")),
            "timeout": msg.get("timeout") is True, "cpu_s": _float_or_none(msg.get("cpu_s")),
            "wall": _float_or_none(msg.get("wall_s")) or 0.0, "killed": bool(msg.get("killed"))})


def _int_or_none(v):
    return v if type(v) is int else None


def _float_or_none(v):
    return float(v) if (type(v) is int or type(v) is float) and v == v and 0 <= v < 1e9 else None
