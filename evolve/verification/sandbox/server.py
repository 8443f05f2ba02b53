"""The zygote fork-server. Standard library only.

codec.py + harness.py + this file, concatenated, run as ``python -s -S -B -P -c <boot> <source>
<config json>`` (inside bubblewrap by default); never imported by the sandboxed side from the
package. The server stays tiny (no torch, no numpy) and **never holds any job's data**: it never
reads a source, an argument or a result. Each of its ``slots`` owns three pipes made by the
parent: payload (parent -> job), results and output (job -> parent). The server keeps one clean
job process per slot forked ahead (a copy of a server that knows nothing of any job); it isolates
itself, then reads its own job's payload from the slot's pipe and closes it. When the job ends the
server reaps it, reports, and forks the slot's next one.

Control (newline-delimited JSON): parent -> server on ``ctl_r``: {"run": slot, "id": n,
"timeout": s} and {"kill": slot, "id": n, "why": str}; server -> parent on ``ctl_w``:
{"ready": true, ...} once, {"done": slot, "id": n|null, "exit", "signal", "timeout", "why",
"cpu_s", "wall_s"} per ended child, and {"stats": {...}} when ``ctl_r`` closes.

Each slot's process is a *keeper* (a plain fork of the server) that makes a new pid namespace
(plus IPC and mount namespaces where seccomp or bubblewrap is missing) and forks the job into it,
then waits: creating and tearing down a pid namespace sleeps in the kernel for milliseconds here,
and the keeper takes that off the server's loop. The job is pid 1 of a namespace with nothing
else in it, so it can address no other process, and every process it might start dies with it.
It drops every capability, sets no_new_privs and loads the seccomp filter the parent compiled,
and only then reads its payload. (Under bubblewrap the server holds CAP_SYS_ADMIN inside the
sandbox's user namespace only, to make those namespaces; as root it has it anyway.)
"""

import os
import sys
import time

try:  # as a package module; in the server source these are already defined
    from evolve.verification.sandbox.harness import _on_alarm, run_harness
    from evolve.verification.sandbox.jobenv import _TASKS_MAX, _limit_tasks, _reset_pipes, _sysctl_dir
except ImportError:
    pass

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 1, 2, 4, 8, 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 1, 4, 38, 22
_PR_SET_CHILD_SUBREAPER = 36
_SYS = {"x86_64": {"capset": 126, "mount_setattr": 442}, "aarch64": {"capset": 91, "mount_setattr": 442}}


class _Kernel:
    """libc calls bound once in the server (children inherit them; no dlopen per job)."""

    def __init__(self, bpf_hex):
        import ctypes

        self.c = ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.prctl = libc.prctl
        self.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        self.mount = libc.mount
        self.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self.syscall = libc.syscall
        self.syscall.restype = ctypes.c_long
        self.unshare_fn = libc.unshare
        self.unshare_fn.argtypes = [ctypes.c_int]
        self.umount2 = libc.umount2
        self.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.nr = _SYS.get(os.uname().machine, {})
        self.hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        self.caps = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2: all zero
        self.attr = (ctypes.c_uint64 * 4)(1, 0, 0, 0)  # struct mount_attr: MOUNT_ATTR_RDONLY
        self.bpf = None
        if bpf_hex:
            raw = bytes.fromhex(bpf_hex)

            class _Prog(ctypes.Structure):
                _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

            self._buf = ctypes.create_string_buffer(raw, len(raw))
            self._prog = _Prog(len(raw) // 8, ctypes.addressof(self._buf))
            self.bpf = ctypes.byref(self._prog)

    def err(self, what):
        e = self.c.get_errno()
        return OSError(e, f"{what}: {os.strerror(e)}")

    def unshare(self, flags):
        if self.unshare_fn(flags) != 0:
            raise self.err("unshare")

    def mount_fs(self, src, target, fstype, flags, data):
        if self.mount(src, target, fstype, flags, data) != 0:
            raise self.err(f"mount {target!r}")

    def read_only_root(self):
        # mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, {RDONLY}): every mount below / at once.
        if self.syscall(self.nr["mount_setattr"], -100, b"/", 0x8000, self.attr, 32) != 0:
            raise self.err("mount_setattr")

    def drop_caps(self):
        if self.syscall(self.nr["capset"], self.hdr, self.caps) != 0:
            raise self.err("capset")

    def seccomp(self):
        if self.prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or self.prctl(_PR_SET_SECCOMP, 2, self.bpf, 0, 0):
            raise self.err("seccomp")


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
    if in_ns:
        _limit_tasks(cfg)
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
        work = f"{cfg['tmp']}/evolve-job-{os.urandom(12).hex()}"
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
        run_harness(job, job["nonce"], 3, tuple(cfg.get("hide", ())))
    except BaseException as e:  # noqa: BLE001 - the harness itself failed: report, no sentinel
        try:
            os.write(2, (f"harness error: {e!r}\n").encode())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        exit_(0)


def _ns_flags(cfg):
    # Under bubblewrap no mount namespace per job: mounting (and the kernel tearing the mounts down
    # at exit) halved throughput here, and the view is read-only anyway. No IPC namespace where the
    # seccomp filter denies System V IPC and POSIX queues (and there is no /dev/shm): making and
    # dropping one per job cost 2.5x in jobs per second here. Without seccomp, each job gets one.
    ipc = 0 if cfg.get("bpf") else _CLONE_NEWIPC
    return _CLONE_NEWPID | ipc | (0 if cfg.get("in_bwrap") else _CLONE_NEWNS)


def _keeper(k, cfg, ns):
    """Between the server and one job: it makes the job's namespaces and waits for the job, so that
    creating and tearing down a pid namespace (milliseconds asleep in the kernel here) never holds up
    the server's loop. It exits with the job's status (128 + signal if killed); wait4 on it gives the
    job's CPU time too. It holds no job data and no pipe once the job is forked."""
    import signal

    code = 120
    state = {"pid": 0, "stop": False}

    def stop(signum, frame):  # the server's kill: the keeper kills the job and reaps it, so its CPU
        state["stop"] = True  # time reaches the server's wait4 (a group kill would lose it)
        if state["pid"]:
            try:
                os.kill(state["pid"], signal.SIGKILL)
            except OSError:
                pass

    try:
        signal.signal(signal.SIGUSR1, stop)
        kern = cfg["_kernel"]
        os.setsid()  # the server kills this group (keeper and job) only if the keeper does not answer
        if cfg["_subreaper"]:
            kern.prctl(_PR_SET_PDEATHSIG, 9, None, 0, 0)
        if ns:
            try:
                kern.unshare(_ns_flags(cfg))
            except OSError:
                os._exit(121)  # never run a job with less isolation than the server reported
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
            _child(k, cfg, ns)
        state["pid"] = pid
        if state["stop"]:
            stop(0, None)
        rep = cfg.get("rep_w") if ns else None
        if rep is None:
            os.closerange(3, 1 << 16)
        else:
            os.closerange(3, rep)
            os.closerange(rep + 1, 1 << 16)
        while True:
            try:
                _, st, ru = os.wait4(pid, 0)
                break
            except InterruptedError:
                continue
        code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)
        # Straight to the parent, before this process exits: the job is gone (reaped, its namespace torn
        # down), and two wake-ups (the keeper's exit, the server's loop) are off the parent's critical path.
        # Without a pid namespace the server must first check the job's group (orphans): no report then.
        if rep is not None:
            os.write(rep, b"%d %d %r %d\n" % (k, code, ru.ru_utime + ru.ru_stime, state["stop"]))
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code)


def _ns_available(cfg):
    """Whether a keeper can make new pid/IPC namespaces here (probed once, in a throwaway child)."""
    pid = os.fork()
    if pid == 0:
        try:
            cfg["_kernel"].unshare(_ns_flags(cfg))
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0


class _Slot:
    __slots__ = ("pid", "pidfd", "id", "deadline", "t0", "timeout", "why", "dir", "hard")

    def __init__(self):
        self.pid, self.pidfd, self.id, self.deadline, self.t0 = None, -1, None, None, 0.0
        self.timeout, self.why, self.dir, self.hard = False, None, None, None

    def stop(self):
        """Ask the keeper to kill the job (it reaps it: no CPU time lost); a group kill after 1 s."""
        import signal

        if self.hard is None:
            self.hard = time.monotonic() + 1.0
            try:
                os.kill(self.pid, signal.SIGUSR1)
            except OSError:
                pass


class _Server:
    def __init__(self, cfg):
        import json
        import signal

        self.cfg, self.json = cfg, json
        sys.dont_write_bytecode = True
        kern = _Kernel(cfg.get("bpf"))
        cfg["_kernel"] = kern
        kern.prctl(_PR_SET_DUMPABLE, 0, None, 0, 0)  # no same-uid /proc/<pid>/{fd,mem}, no ptrace
        cfg["_subreaper"] = kern.prctl(_PR_SET_CHILD_SUBREAPER, 1, None, 0, 0) == 0
        _preimport()
        cfg["_sysk"] = _sysctl_dir(cfg, kern)
        cfg["tmp"] = "/tmp" if cfg.get("in_bwrap") or not os.access("/dev/shm", os.W_OK) else "/dev/shm"
        cfg["_stdout"] = open(1, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
        cfg["_stderr"] = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
        signal.signal(signal.SIGALRM, _on_alarm)  # for the children's harness (inherited)
        self.ctl_r, self.ctl_w = cfg["ctl_r"], cfg["ctl_w"]
        self.slots = [_Slot() for _ in cfg["slots"]]
        self.by_pidfd, self.inbuf, self.open = {}, b"", True
        self.ns = bool(cfg.get("ns")) and _ns_available(cfg)
        import gc

        gc.freeze()  # what exists now is never traversed by a job's collector: fewer copy-on-write faults
        for k in range(len(self.slots)):
            self._spawn(k)

    def send(self, msg):
        data = (self.json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(self.ctl_w, data):]

    def _spawn(self, k):
        pid = os.fork()
        if pid == 0:
            _keeper(k, self.cfg, self.ns)
        s = self.slots[k]
        s.pid, s.id, s.deadline, s.timeout, s.why, s.hard = pid, None, None, False, None, None
        s.pidfd = os.pidfd_open(pid)
        self.by_pidfd[s.pidfd] = k

    def run(self):
        import resource
        import select

        kern = self.cfg["_kernel"]
        self.send({"ready": True, "ns": self.ns, "seccomp": kern.bpf is not None, "uid": os.getuid(),
                   "tasks_max": _TASKS_MAX if self.ns and self.cfg.get("_sysk") is not None else None,
                   "pid": os.getpid(), "slots": len(self.slots)})
        while self.open:
            deadlines = [s.deadline for s in self.slots if s.deadline is not None and not s.timeout]
            deadlines += [s.hard for s in self.slots if s.hard is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            try:
                ready, _, _ = select.select([self.ctl_r, *self.by_pidfd], [], [], wait)
            except InterruptedError:
                ready = []
            if self.ctl_r in ready:  # control first: a job's "run" is always known before its exit
                self._control()
            now = time.monotonic()
            for s in self.slots:
                if s.deadline is not None and not s.timeout and now >= s.deadline:
                    s.timeout = True
                    s.stop()
                if s.hard is not None and now >= s.hard:
                    s.hard = now + 3600.0  # once
                    _kill(s.pid)
            for fd in ready:
                if fd in self.by_pidfd:
                    self._reap(self.by_pidfd[fd])
            _reap_orphans(self.slots)
        for s in self.slots:
            _kill(s.pid)
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        self.send({"stats": {"server_cpu_s": me.ru_utime + me.ru_stime, "jobs_cpu_s": kids.ru_utime + kids.ru_stime}})

    def _control(self):
        chunk = os.read(self.ctl_r, 1 << 16)
        if not chunk:
            self.open = False
            return
        *msgs, self.inbuf = (self.inbuf + chunk).split(b"\n")
        for m in msgs:
            msg = self.json.loads(m)
            s = self.slots[msg.get("run", msg.get("kill"))]
            if "run" in msg:
                s.id, s.t0 = msg["id"], time.monotonic()
                s.deadline = s.t0 + float(msg["timeout"])
            elif s.id == msg["id"] and s.why is None:
                s.why = str(msg.get("why", "killed"))[:40]
                s.stop()

    def _done(self, k, code, sig, cpu, outlived):
        s = self.slots[k]
        if s.id is not None:
            self.send({"done": k, "id": s.id, "exit": code if sig is None else None, "signal": sig, "timeout": s.timeout,
                       "killed": s.timeout or s.why is not None, "why": s.why, "orphans": bool(outlived),
                       "cpu_s": cpu, "wall_s": time.monotonic() - s.t0})

    def _reap(self, k):
        s = self.slots[k]
        try:
            pid, st, ru = os.wait4(s.pid, os.WNOHANG)
        except ChildProcessError:
            pid, st, ru = s.pid, 0, None
        if pid == 0:
            return
        outlived = not self.ns and _kill(s.pid)  # its group outlived it (possible only without a pid ns)
        del self.by_pidfd[s.pidfd]
        os.close(s.pidfd)
        code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else None
        if code == 121:
            raise SystemExit("evolve sandbox: a keeper could not make the job's namespaces")
        sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else (code - 128 if code is not None and code > 128 else None)
        self._done(k, code, sig, (ru.ru_utime + ru.ru_stime) if ru else None, outlived)
        if not self.ns:
            _remove_job_dirs(self.cfg["tmp"])
        self._spawn(k)


def _kill(pid):
    """SIGKILL the job's process group (the fallback without a pid namespace) and the job; True when
    the group still existed (so something of the job was alive)."""
    import signal

    alive = False
    for fn in (os.killpg, os.kill):
        try:
            fn(pid, signal.SIGKILL)
            alive = True
        except (ProcessLookupError, PermissionError):
            pass
    return alive


def _remove_job_dirs(tmp):
    """Fallback without namespaces only: job folders of ended jobs (prepared ones are empty)."""
    import shutil

    for name in os.listdir(tmp):
        if name.startswith("evolve-job-"):
            path = f"{tmp}/{name}"
            try:
                os.rmdir(path)
            except OSError:
                shutil.rmtree(path, ignore_errors=True)


def _reap_orphans(slots):
    """Reap re-parented grandchildren (the fallback without a pid namespace; we are their subreaper),
    never one of the slots' own children (those are reaped through their pidfds)."""
    ours = {s.pid for s in slots}
    for _ in range(64):
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in ours:
            return
        try:
            os.waitpid(info.si_pid, os.WNOHANG)
        except ChildProcessError:
            return


# What candidate code commonly imports (typing alone costs a child ~5 ms). Not random, statistics or
# threading: they register at-fork hooks (random reseeds from urandom in every child), which made
# each fork about 3x dearer when measured here; and not hashlib, decimal, fractions: each module
# loaded here makes every fork a little dearer, and few candidates use them.
_PREIMPORT = ("math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "typing",
              "marshal", "json", "json.encoder", "resource", "fcntl", "signal")


def _preimport():
    import importlib

    for name in _PREIMPORT:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass


if __name__ == "__main__":
    import json as _json

    _Server(_json.loads(sys.argv[-1])).run()
