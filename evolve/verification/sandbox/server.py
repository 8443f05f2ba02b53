"""The zygote fork-server. Standard library only.

codec.py + harness.py + jobenv.py + keeper.py + kernel.py + this file, concatenated, compiled by the parent
and run as ``python -s -S -B -P -c <boot> <config json>`` with the marshalled code on stdin (inside
bubblewrap by default); never imported by the sandboxed side from the
package. The server stays tiny (no torch, no numpy) and **never holds any job's data**: it never
reads a source, an argument or a result. Each of its ``slots`` owns three pipes made by the
parent: payload (parent -> job), results and output (job -> parent). The server keeps one clean
job process per slot forked ahead (a copy of a server that knows nothing of any job); it isolates
itself, then reads its own job's payload from the slot's pipe and closes it. When the job ends the
server reaps it, reports, and forks the slot's next one.

Control (newline-delimited JSON): parent -> server on ``ctl_r``: {"run": slot, "id": n,
"timeout": s}, {"kill": slot, "id": n, "why": str} and {"retire": slot} (the parent will never use
the slot again: its keeper group is killed, with whatever job process it holds, and not replaced);
server -> parent on ``ctl_w``:
{"ready": true, ...} once, {"done": slot, "id": n|null, "exit", "signal", "timeout", "why",
"cpu_s", "wall_s"} per ended child, and {"stats": {...}} when ``ctl_r`` closes.

Each slot has a *keeper* (a plain fork of the server, made once and kept for the server's life) that
forks each of the slot's job processes into a fresh pid namespace, waits for it, reports its end and
forks the next one at once. The keeper runs no job code and reads no job data: it only holds its
slot's pipes to hand them to each new job. Creating and tearing down a pid namespace sleeps in the
kernel for milliseconds here, and the keeper takes that off the server's loop; keeping it across
jobs saves a fork, a Python start-up's copy-on-write faults and an exit per job (most of the
keeper's CPU when it was made per job). The job is pid 1 of a namespace with nothing else in it,
so it can address no other process, and every process it might start dies with it. It drops every
capability, sets no_new_privs and loads the seccomp filter the parent compiled, and only then reads
its payload. (Under bubblewrap the server and keepers hold CAP_SYS_ADMIN inside the sandbox's user
namespace only, to make those namespaces; as root they have it anyway.)

Keeper protocol: server -> keeper on the keeper's own pipe, ``kill <gen>`` (gen: the keeper's count of
job processes forked, so a late kill never reaches the next job); keeper -> parent, ``<slot> <status>
<cpu> <stopped> <orphans> <token>``, and keeper -> server, ``<slot> <gen> <status> <cpu> <stopped>
<orphans>``, once per reaped job process (status: exit code, or 128 + signal; token: the random name
the keeper gave that process, which the process sends back as ``<nonce> P <token>`` once it has read
its whole payload). A keeper whose job was killed (or died of a signal) with bytes still in the
slot's payload pipe forks no next process: it waits for the server to kill it (the parent retires
that slot), so no process of the slot reads and runs what was left there.
"""

import os
import sys
import time

try:  # as a package module; in the server source these are already defined
    from evolve.verification.sandbox.harness import _on_alarm, run_harness, watch_builtins
    from evolve.verification.sandbox.jobenv import (
        _TASKS_MAX,
        _limit_tasks,
        _preimport,
        _reset_pipes,
        _sysctl_dir,
    )
    from evolve.verification.sandbox.keeper import (
        _await_job,
        _close_except,
        _group_alive,
        _kill,
        _pipe_unread,
        _reap_orphans,
    )
    from evolve.verification.sandbox.kernel import (
        _PR_SET_CHILD_SUBREAPER,
        _PR_SET_DUMPABLE,
        _PR_SET_PDEATHSIG,
        _Kernel,
    )
except ImportError:
    pass

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 1, 2, 4, 8, 16384, 1 << 18


def _read_payload(fd):
    """The job's payload from its own pipe: an 8-byte length, then a marshalled dict."""
    import marshal

    def exactly(n):
        chunks, got = [], 0
        while got < n:
            c = os.read(fd, min(n - got, 1 << 20))
            if not c:
                os._exit(0)  # the parent gave up on this slot
            chunks.append(c)
            got += len(c)
        return b"".join(chunks)

    n = int.from_bytes(exactly(8), "little")
    return marshal.loads(exactly(n))


def _isolate(cfg, k, in_ns):
    """In the new child, before any job data exists in it: fds, filesystem, capabilities, seccomp."""
    kern = cfg["_kernel"]
    if cfg["_subreaper"]:
        kern.prctl(_PR_SET_PDEATHSIG, 9, None, 0, 0)  # the job never outlives a killed server
    if in_ns and _ns_flags(cfg):
        kern.unshare(_ns_flags(cfg))  # its own mount / IPC namespaces (the fallbacks), not its keeper's
    if in_ns:
        _limit_tasks(cfg)
    else:
        os.setpgid(0, 0)  # no pid namespace: its own process group, which its keeper checks for orphans
    pay, res, out = cfg["slots"][k]
    _reset_pipes(pay, res, out)
    null = os.open("/dev/null", os.O_RDONLY)
    # Copies above every source first, so no move can clobber another source: the slots' numbers
    # depend on how many fds the parent held (a fixed 60..63 collided once a Ray driver had ~60
    # open, wiring a job to the wrong pipe).
    base = max(out, res, pay, null) + 1
    for i, src in enumerate((out, res, pay, null)):
        os.dup2(src, base + i)
    os.dup2(base + 3, 0)
    os.dup2(base, 1)
    os.dup2(base, 2)
    os.dup2(base + 1, 3)
    os.dup2(base + 2, 4)
    os.closerange(5, max(1 << 16, base + 4))  # the control pipes, every other slot's pipes, the copies
    if in_ns and cfg.get("in_bwrap"):
        os.chdir("/tmp")  # bubblewrap's view is read-only everywhere and has no /proc: nothing to mount
    elif in_ns:  # the fallback as root, without bubblewrap: make the host read-only from in here
        kern.mount_fs(None, b"/", None, _MS_REC | _MS_PRIVATE, None)  # nothing propagates out
        kern.read_only_root()
        flags = _MS_NOSUID | _MS_NODEV
        kern.mount_fs(b"tmpfs", b"/tmp", b"tmpfs", flags | _MS_RDONLY, b"size=4096,mode=0555")
        kern.mount_fs(b"tmpfs", b"/proc", b"tmpfs", flags | _MS_NOEXEC | _MS_RDONLY, b"size=4096,mode=0555")
        if os.path.isdir("/dev/shm"):
            kern.mount_fs(b"tmpfs", b"/dev/shm", b"tmpfs", flags | _MS_RDONLY, b"size=4096")
        os.chdir("/tmp")
    else:  # no namespaces: the keeper's process group is the job's (the server kills the group)
        work = cfg["_work"]  # named by its keeper, which removes it after the job
        os.mkdir(work, 0o700)
        os.chdir(work)
        if os.getuid() == 0 and cfg.get("drop_uid"):
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
    try:
        kern.drop_caps()
    except OSError:
        if in_ns:
            raise
    if kern.bpf is not None:
        kern.seccomp()


def _child(k, cfg, in_ns):
    """The slot's job process. Never returns."""
    import resource

    exit_ = os._exit  # bound before any job code: a candidate patching os._exit cannot run after the sentinel
    try:
        _isolate(cfg, k, in_ns)
        sys.stdout, sys.stderr = cfg["_stdout"], cfg["_stderr"]  # made once by the server, on fds 1 and 2
        job = _read_payload(4)
        os.close(4)
        mem = job.get("mem_mb", 512) * 2**20
        cpu = max(1, int(job.get("cpu", 2) + 0.999))
        for lim, val in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, cpu),
                         (resource.RLIMIT_FSIZE, cfg["fsize"]), (resource.RLIMIT_NOFILE, 64),
                         (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(lim, (val, val))
        run_harness(job, job["nonce"], 3, tuple(cfg.get("hide", ())), cfg["_watch"], cfg["_tok"])
    except BaseException as e:  # noqa: BLE001 - the harness itself failed: report, no sentinel
        try:
            os.write(2, (f"harness error: {e!r}\n").encode())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        exit_(0)


def _ns_flags(cfg):
    """The namespaces a job makes for itself, besides the pid namespace its keeper makes for it.
    Under bubblewrap no mount namespace per job: mounting (and the kernel tearing the mounts down at
    exit) halved throughput here, and the view is read-only anyway. No IPC namespace where the
    seccomp filter denies System V IPC and POSIX queues (and there is no /dev/shm): making and
    dropping one per job cost 2.5x in jobs per second here. Without seccomp, each job gets one."""
    ipc = 0 if cfg.get("bpf") else _CLONE_NEWIPC
    return ipc | (0 if cfg.get("in_bwrap") else _CLONE_NEWNS)


def _keeper(k, cfg, ns, ctl):
    """Between the server and one slot's jobs, for the server's life: it makes each job's pid
    namespace, forks the job into it, waits for it (killing it when the server asks), reports its
    end (to the parent first, the critical path; then to the server) and forks the slot's next job
    process at once. wait4 on the job gives its CPU time, so no kill loses it. Never returns."""
    import select
    import signal

    # shutil only where there is no namespace (the job's folder): it pulls in bz2, lzma and zlib (six
    # shared libraries, 30 mappings), which every job fork would copy and every job exit tear down.
    shutil = None if ns else __import__("shutil")
    code = 120
    try:
        kern = cfg["_kernel"]
        os.setsid()  # the server kills this group (keeper and job) only if the keeper does not answer
        if cfg["_subreaper"]:
            kern.prctl(_PR_SET_PDEATHSIG, 9, None, 0, 0)
        rep, krep, own_ns = cfg["rep_w"], cfg["_krep_w"], cfg.get("_pidns", -1)
        _close_except({ctl, rep, krep, own_ns, cfg.get("_sysk") or -1, *cfg["slots"][k]})
        if ns and own_ns < 0:
            own_ns = os.pidfd_open(os.getpid())  # setns through a pidfd: the keeper's own pid namespace
        buf, gen = [b""], 0
        while True:
            if ns:
                try:
                    if gen:  # back in its own namespace: unshare makes a pid namespace only from there
                        kern.setns(own_ns, _CLONE_NEWPID)
                    kern.unshare(_CLONE_NEWPID)
                except OSError:
                    os._exit(121)  # never run a job with less isolation than the server reported
            # This job process's token (the random part of its folder's name, so no extra syscall): it sends
            # it back with its payload's nonce, and the report below names it (see batch._Batch._complete).
            cfg["_tok"] = tok = os.urandom(12).hex()
            cfg["_work"] = f"{cfg['tmp']}/evolve-job-{cfg['_srv']}-{tok}"  # without namespaces only
            pid = os.fork()
            if pid == 0:
                _child(k, cfg, ns)
            pidfd = os.pidfd_open(pid)
            stopped = _await_job(ctl, pidfd, gen, buf, select.select, signal.SIGKILL)
            while True:
                try:
                    _, st, ru = os.wait4(pid, 0)
                    break
                except InterruptedError:
                    continue
            os.close(pidfd)
            status = os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)
            orphans = not ns and _group_alive(pid)  # without a pid namespace: did its group outlive it?
            if not ns:
                shutil.rmtree(cfg["_work"], ignore_errors=True)
            cpu = ru.ru_utime + ru.ru_stime
            # Killed or died of a signal: maybe before it read its payload whole. Bytes left in the payload
            # pipe now are that job's (the slot's next payload comes only after this report), and a next
            # process would read and run them unwatched until the parent's retire lands (seen: its output
            # filled the killed job's reply). So none is forked: the parent retires the slot (no ack).
            left = (stopped or status >= 128) and _pipe_unread(cfg["slots"][k][0])
            os.write(rep, b"%d %d %r %d %d %s\n" % (k, status, cpu, stopped, orphans, tok.encode()))
            os.write(krep, b"%d %d %d %r %d %d\n" % (k, gen, status, cpu, stopped, orphans))
            gen += 1
            if left:
                while os.read(ctl, 4096):  # until the server kills this group (retire) or is gone
                    pass
                break
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code)


def _ns_available(cfg):
    """Whether a keeper can make a pid namespace per job here (make one, go back, make another, as a
    keeper does) and a job its own other namespaces (probed once, in a throwaway child)."""
    pid = os.fork()
    if pid == 0:
        try:
            kern, own = cfg["_kernel"], cfg.get("_pidns", -1)
            kern.unshare(_CLONE_NEWPID)
            kern.setns(own if own >= 0 else os.pidfd_open(os.getpid()), _CLONE_NEWPID)
            kern.unshare(_CLONE_NEWPID | _ns_flags(cfg))
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0


class _Slot:
    __slots__ = ("pid", "pidfd", "ctl", "gen", "id", "deadline", "t0", "timeout", "why", "hard", "retired")

    def __init__(self):
        self.pid, self.pidfd, self.ctl, self.gen, self.retired = None, -1, -1, 0, False
        self.id, self.deadline, self.t0, self.timeout, self.why, self.hard = None, None, 0.0, False, None, None

    def ended(self):
        self.id, self.deadline, self.timeout, self.why, self.hard = None, None, False, None, None

    def stop(self):
        """Ask the keeper to kill the job (it reaps it: no CPU time lost); a group kill after 1 s."""
        if self.hard is None:
            self.hard = time.monotonic() + 1.0
            try:
                os.write(self.ctl, b"kill %d\n" % self.gen)
            except OSError:
                pass


class _Server:
    def __init__(self, cfg):
        import json
        import signal

        self.cfg, self.json = cfg, json
        cfg["_srv"] = os.getpid()
        sys.dont_write_bytecode = True
        kern = _Kernel(cfg.get("bpf"))
        cfg["_kernel"] = kern
        kern.prctl(_PR_SET_DUMPABLE, 0, None, 0, 0)  # no same-uid /proc/<pid>/{fd,mem}, no ptrace
        cfg["_subreaper"] = kern.prctl(_PR_SET_CHILD_SUBREAPER, 1, None, 0, 0) == 0
        _preimport()
        try:  # for the keepers' way back to this pid namespace (before /proc goes, under bubblewrap)
            cfg["_pidns"] = os.open("/proc/self/ns/pid", os.O_RDONLY)
        except OSError:
            cfg["_pidns"] = -1  # then each keeper uses a pidfd on itself (Linux 5.8+)
        cfg["_sysk"] = _sysctl_dir(cfg, kern)
        cfg["tmp"] = "/tmp" if cfg.get("in_bwrap") or not os.access("/dev/shm", os.W_OK) else "/dev/shm"
        cfg["_stdout"] = open(1, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
        cfg["_stderr"] = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
        signal.signal(signal.SIGALRM, _on_alarm)  # for the children's harness (inherited)
        self.ctl_r, self.ctl_w = cfg["ctl_r"], cfg["ctl_w"]
        self.krep_r, cfg["_krep_w"] = os.pipe()  # keepers -> server: a job process reaped
        os.set_blocking(self.krep_r, False)
        self.slots = [_Slot() for _ in cfg["slots"]]
        self.by_pidfd, self.inbuf, self.kbuf, self.open = {}, b"", b"", True
        self.ns = bool(cfg.get("ns")) and _ns_available(cfg)
        import gc

        cfg["_watch"] = watch_builtins()  # once, here: no job copies the builtins dict (harness.py)
        gc.freeze()  # what exists now is never traversed by a job's collector: fewer copy-on-write faults
        for k in range(len(self.slots)):
            self._spawn(k)

    def send(self, msg):
        data = (self.json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(self.ctl_w, data):]

    def _spawn(self, k):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _keeper(k, self.cfg, self.ns, r)
        os.close(r)
        os.set_blocking(w, False)  # a kill is a few bytes; a stuck keeper never blocks the server
        s = self.slots[k]
        s.pid, s.ctl, s.gen = pid, w, 0
        s.ended()
        s.pidfd = os.pidfd_open(pid)
        self.by_pidfd[s.pidfd] = k

    def run(self):
        import resource
        import select

        kern = self.cfg["_kernel"]
        self.send({"ready": True, "ns": self.ns, "seccomp": kern.bpf is not None, "uid": os.getuid(),
                   "tasks_max": _TASKS_MAX if self.ns and self.cfg.get("_sysk") is not None else None,
                   "pid": os.getpid(), "slots": len(self.slots), "watch": self.cfg["_watch"] is not None})
        while self.open:
            deadlines = [s.deadline for s in self.slots if s.deadline is not None and not s.timeout]
            deadlines += [s.hard for s in self.slots if s.hard is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            try:
                ready, _, _ = select.select([self.ctl_r, self.krep_r, *self.by_pidfd], [], [], wait)
            except InterruptedError:
                ready = []
            if self.ctl_r in ready:  # control first: a job's "run" is always known before its end
                self._control()
            if self.krep_r in ready:
                self._reports()
            now = time.monotonic()
            for s in self.slots:
                if s.deadline is not None and not s.timeout and now >= s.deadline:
                    s.timeout = True
                    s.stop()
                if s.hard is not None and now >= s.hard and s.pid is not None:
                    s.hard = now + 3600.0  # once
                    _kill(s.pid)
            for fd in ready:
                if fd in self.by_pidfd:
                    self._reap(self.by_pidfd[fd])
            _reap_orphans(self.slots)
        live = [s.pid for s in self.slots if s.pid is not None]  # a retired slot's keeper is reaped already
        for pid in live:
            _kill(pid)
        for pid in live:  # reaped, so that their jobs' CPU time reaches the stats
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        if not self.ns:  # the prepared jobs' folders (their keepers remove each ended job's)
            import shutil

            for name in os.listdir(self.cfg["tmp"]):
                if name.startswith(f"evolve-job-{self.cfg['_srv']}-"):  # never another server's
                    shutil.rmtree(f"{self.cfg['tmp']}/{name}", ignore_errors=True)
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        self.send({"stats": {"server_cpu_s": me.ru_utime + me.ru_stime, "jobs_cpu_s": kids.ru_utime + kids.ru_stime,
                                 "jobs_minflt": kids.ru_minflt}})

    def _control(self):
        chunk = os.read(self.ctl_r, 1 << 16)
        if not chunk:
            self.open = False
            return
        *msgs, self.inbuf = (self.inbuf + chunk).split(b"\n")
        for m in msgs:
            msg = self.json.loads(m)
            if "retire" in msg:
                self._retire(msg["retire"])
                continue
            s = self.slots[msg.get("run", msg.get("kill"))]
            if "run" in msg:
                s.id, s.t0 = msg["id"], time.monotonic()
                s.deadline = s.t0 + float(msg["timeout"])
            elif s.id == msg["id"] and s.why is None:
                s.why = str(msg.get("why", "killed"))[:40]
                s.stop()

    def _reports(self):
        """Keepers' reports: a job process reaped (the slot's next one is forked already)."""
        try:
            chunk = os.read(self.krep_r, 1 << 16)
        except BlockingIOError:
            return
        *lines, self.kbuf = (self.kbuf + chunk).split(b"\n")
        for line in lines:
            k, gen, status, cpu, _, orphans = line.split()
            k, status = int(k), int(status)
            s = self.slots[k]
            s.gen = int(gen) + 1
            sig = status - 128 if status > 128 else None
            self._done(k, status if sig is None else None, sig, float(cpu), orphans == b"1")
            s.ended()

    def _done(self, k, code, sig, cpu, outlived):
        s = self.slots[k]
        if s.id is not None:
            self.send({"done": k, "id": s.id, "exit": code if sig is None else None, "signal": sig, "timeout": s.timeout,
                       "killed": s.timeout or s.why is not None, "why": s.why, "orphans": bool(outlived),
                       "cpu_s": cpu, "wall_s": time.monotonic() - s.t0})

    def _retire(self, k):
        """The parent gave the slot up: its pipes may hold another job's bytes (batch._Batch._complete).
        Kill its keeper's group, so that no job process of the slot reads or runs what is left there
        (unwatched: no deadline of ours covers it); _reap then reports the job it held, if any, and
        forks no new keeper."""
        s = self.slots[k]
        if not s.retired:
            s.retired = True
            if s.pid is not None:
                _kill(s.pid)

    def _reap(self, k):
        """A keeper died (killed by the group kill after it did not answer, or failed, or its slot was
        retired): the slot's job with it. A fresh keeper takes the slot, unless it was retired."""
        s = self.slots[k]
        try:
            pid, st, ru = os.wait4(s.pid, os.WNOHANG)
        except ChildProcessError:
            pid, st, ru = s.pid, 0, None
        if pid == 0:
            return
        del self.by_pidfd[s.pidfd]
        os.close(s.pidfd)
        os.close(s.ctl)
        code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else None
        if code == 121:
            raise SystemExit("evolve sandbox: a keeper could not make the job's namespaces")
        sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else None
        self._done(k, code, sig, (ru.ru_utime + ru.ru_stime) if ru else None, False)
        if s.retired:
            s.pid, s.pidfd, s.ctl = None, -1, -1
            s.ended()
            return
        self._spawn(k)



if __name__ == "__main__":
    import json as _json

    _Server(_json.loads(sys.argv[-1])).run()
