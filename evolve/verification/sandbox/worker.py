"""The fork-server and the in-child harness. Standard library only.

This file is run as ``python -I -S -B -c <this source> <config json>`` (inside bubblewrap where
available), never imported by the sandboxed side from the package: the server must stay tiny (no
torch, no numpy), so forking it per job is cheap. The parent also imports it for the plain-value
codec (``encode``/``decode``), so both sides share one definition.

Protocol (newline-delimited JSON both ways, on the server's stdin/stdout):
  parent -> server: {"id", "src", "entry", "calls": [encode_args(args), ...], "check": str|null,
                     "timeout": s, "cpu": s, "mem_mb": n}
  server -> parent: {"id", "lines": [...], "forged": n, "exit": code, "signal": sig, "timeout": bool,
                     "out": head, "out_bytes": n, "flags": [...], "wall": s, "compile_error": str|null}
Child result lines are ``<nonce> <payload>``; the nonce is made per job by the server, kept in
harness locals (never globals or env), and lines without it are counted as forged.
"""

import os
import sys
import time

_NAN = "\x00nan"
_FROZEN = "\x00frozenset"
_MAX_DEPTH = 64


class NonPlain(Exception):
    """A value that is not made of exact built-in types."""


def _make_encoder():
    # Every builtin is bound now, before any candidate code can run: patching builtins later
    # cannot change how results are converted.
    _type, _repr, _len = type, repr, len
    _name = type.__dict__["__name__"].__get__
    _scalars = (int, bool, str, bytes, type(None), complex)
    _float, _list, _tuple, _dict, _set, _fset = float, list, tuple, dict, set, frozenset
    _join = ",".join

    def enc(x, depth=0):
        t = _type(x)  # exact type first: subclasses never reach __iter__/__eq__/__repr__ overrides
        if depth > _MAX_DEPTH:
            raise NonPlain(f"nesting deeper than {_MAX_DEPTH}")
        if t in _scalars:
            return _repr(x)
        if t is _float:
            if x != x:
                return _repr(_NAN)
            if x in (1e999, -1e999):
                return "1e999" if x > 0 else "-1e999"
            return _repr(x)
        d = depth + 1
        if t is _list:
            return "[" + _join([enc(e, d) for e in x]) + "]"
        if t is _tuple:
            return "(" + _join([enc(e, d) for e in x]) + ("," if _len(x) == 1 else "") + ")"
        if t is _dict:
            return "{" + _join([enc(k, d) + ":" + enc(v, d) for k, v in x.items()]) + "}"
        if t is _set:
            return "{" + _join([enc(e, d) for e in x]) + "}" if x else "set()"
        if t is _fset:
            return "(" + _repr(_FROZEN) + ",[" + _join([enc(e, d) for e in x]) + "])"
        raise NonPlain(_name(t))

    return enc


encode = _make_encoder()


def _fix(x):
    t = type(x)
    if t is str and x == _NAN:
        return float("nan")
    if t is list:
        return [_fix(e) for e in x]
    if t is tuple:
        if len(x) == 2 and x[0] == _FROZEN and type(x[1]) is list:
            return frozenset(_fix(e) for e in x[1])
        return tuple(_fix(e) for e in x)
    if t is dict:
        return {_fix(k): _fix(v) for k, v in x.items()}
    if t is set:
        return {_fix(e) for e in x}
    return x


def encode_args(args):
    """Arguments for the child: marshal (a C loader there, no ast, no parsing) as hex."""
    import marshal

    encode(args)  # plain values only: raises NonPlain otherwise
    return marshal.dumps(args).hex()


def decode(text):
    """Inverse of :func:`encode` (trusted side: ``ast.literal_eval``, never ``eval``)."""
    import ast

    value = ast.literal_eval(text)
    return _fix(value) if "\\x00" in text else value


# ----------------------------------------------------------------------------------------------
# The harness: runs in the forked child, after rlimits, uid drop and seccomp.

HARNESS_FILE = "<evolve-harness>"
_SPAWN_EVENTS = ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                 "os.forkpty", "pty.spawn")
_NET_EVENTS = ("socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
               "socket.gethostbyname", "socket.sendto")
_INTROSPECTION = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")


def _exc_info(e, tb, _type=type, _str=str, _name=type.__dict__["__name__"].__get__):
    """(type name, message, candidate line) of an exception, defensively (it is candidate data)."""
    try:
        msg = _str(e)[:300]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        msg = "<unprintable>"
    line = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<candidate>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return _name(_type(e)), msg, line


def _make_plain_copy():
    """A fresh structure of exact built-in types equal to the value, or NonPlain (weak path)."""
    _type, _name = type, type.__dict__["__name__"].__get__
    _scalars = (int, bool, str, bytes, type(None), complex, float)
    _list, _tuple, _dict, _set, _fset = list, tuple, dict, set, frozenset

    def cp(x, depth=0):
        t = _type(x)
        if depth > _MAX_DEPTH:
            raise NonPlain(f"nesting deeper than {_MAX_DEPTH}")
        if t in _scalars:
            return x
        d = depth + 1
        if t is _list:
            return [cp(e, d) for e in x]
        if t is _tuple:
            return _tuple([cp(e, d) for e in x])
        if t is _dict:
            return {cp(k, d): cp(v, d) for k, v in x.items()}
        if t is _set:
            return {cp(e, d) for e in x}
        if t is _fset:
            return _fset([cp(e, d) for e in x])
        raise NonPlain(_name(t))

    return cp


def _names(code):
    """Every global name a code object and its nested functions refer to."""
    out = set(code.co_names)
    for c in code.co_consts:
        if type(c) is type(code):
            out |= _names(c)
    return out


_ALARM = [None]  # the running harness's flush, called on SIGALRM


def _on_alarm(signum, frame):
    fn = _ALARM[0]
    if fn is not None:
        fn()


def run_harness(job, code, check_code, nonce, res_fd, hide):
    """Run the candidate and its calls; stream ``<nonce> <payload>`` lines to ``res_fd``."""
    import builtins
    import signal

    # Bound before candidate code runs: patching builtins or os later changes none of these.
    write, enc, repr_, exc_info, type_, any_, len_ = os.write, encode, repr, _exc_info, type, any, len
    dict_items, sys_exit_t, flags_sent, perm = dict.items, SystemExit, set(), PermissionError
    fspath, startswith, str_t, int_t, enumerate_ = os.fsdecode, str.startswith, str, int, enumerate
    clock = time.perf_counter
    flushes = (sys.stdout.flush, sys.stderr.flush)
    o_write = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    # Lines are buffered, and flushed by a 20 ms interval timer and at the sentinel: a quick job
    # is one write (one server wake-up), while a job that hangs still hands over what it finished.
    buf, busy = [], [False]
    join, append, clear = "".join, list.append, list.clear

    def flush():
        if buf:
            write(res_fd, join(buf).encode("utf-8", "backslashreplace"))
            clear(buf)

    def emit(payload, now=False):
        busy[0] = True  # the timer never flushes half-way through this
        append(buf, nonce + " " + payload + "\n")
        if now:
            flush()
        busy[0] = False

    def on_timer():
        if not busy[0]:
            flush()

    def flag(name):
        if name not in flags_sent:
            flags_sent.add(name)
            emit("F " + name, True)

    def hook(event, args):
        if event == "open":
            path, mode, oflags = args
            if type_(path) is int_t:
                return
            p = fspath(path)
            if any_(h in p for h in hide):
                flag("hack: read-test-files")
                raise perm("sandbox: test files are not readable")
            writing = (any_(c in mode for c in "wax+") if type_(mode) is str_t else bool((oflags or 0) & o_write))
            if writing and not (startswith(p, ("/tmp/", "/dev/shm/")) or p == "/dev/null" or not startswith(p, "/")):
                flag("hack: write-outside-tmp")
                raise perm("sandbox: writes outside tmp are not allowed")
        elif event in _SPAWN_EVENTS:
            flag("hack: spawn-process")
            raise perm("sandbox: no processes")
        elif event in _NET_EVENTS:
            flag("hack: network")
            raise perm("sandbox: no network")
        elif event in _INTROSPECTION:
            flag("hack: introspection")
            raise perm("sandbox: no gc introspection")
        elif event == "sys._getframe" and args[0].f_code.co_filename == HARNESS_FILE:
            flag("hack: introspection")
            raise perm("sandbox: harness frames are off limits")
        elif event == "ctypes.dlopen":
            flag("hack: ctypes")
            raise perm("sandbox: no ctypes")

    import marshal

    calls = [marshal.loads(bytes.fromhex(c)) for c in job["calls"]]  # trusted: built by the parent
    snapshot = dict(builtins.__dict__)
    _ALARM[0] = on_timer  # the SIGALRM handler was installed by the server: signal.signal() in a
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)  # fresh child cost ~0.35 ms of CPU here
    sys.addaudithook(hook)
    g = {"__name__": "candidate", "__builtins__": builtins}

    def err_payload(tag, e, tb):
        return f"{tag} err {repr_(exc_info(e, tb))}"

    def guarded(tag, fn):
        """Call fn; on an exception emit an error line. Returns (ok, value)."""
        try:
            return True, fn()
        except sys_exit_t as e:
            flag("hack: sys-exit")
            emit(err_payload(tag, e, e.__traceback__))
        except Exception as e:  # noqa: BLE001 - candidate failures are data
            emit(err_payload(tag, e, e.__traceback__))
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt, custom BaseException
            flag("hack: base-exception")
            emit(err_payload(tag, e, e.__traceback__))
        return False, None

    ok, _ = guarded("L", lambda: exec(code, g))  # noqa: S102 - this is the sandbox
    fn = g.get(job["entry"]) if ok else None
    if ok and not callable(fn):
        ok = False
        emit("L err {}".format(repr_(("NameError", "entry point {!r} is not defined".format(job["entry"]), 0))))
    if ok:
        emit("L ok")
        t0 = clock()
        if check_code is not None:
            _run_check(g, check_code, job["entry"], guarded, emit, flag, snapshot)
        else:
            for i, args in enumerate_(calls):
                okc, value = guarded(f"R {i}", lambda a=args: fn(*a))
                if okc:
                    try:
                        emit(f"R {i} ok {enc(value)}")
                    except NonPlain as e:
                        flag("hack: non-plain-return")
                        emit(f"R {i} np {repr_(e.args[0])}")
                    except Exception as e:  # noqa: BLE001 - e.g. int too large to print
                        emit(err_payload(f"R {i}", e, None))
        emit("T %r" % (clock() - t0))
    changed = [k for k, v in dict_items(builtins.__dict__) if snapshot.get(k, v) is not v]
    if changed or len_(builtins.__dict__) < len_(snapshot):
        flag("hack: monkeypatch")
    for f in flushes:  # bound before the candidate ran: its own print output, for the trace
        try:
            f()
        except Exception:  # noqa: BLE001 - a closed or broken stream
            pass
    emit("END", True)


def _run_check(g, check_code, entry, guarded, emit, flag, snapshot):
    """Weak path: run the task's own check() in the child, the candidate's returns made plain."""
    cp, module_t = _make_plain_copy(), type(sys)

    def plain(fn):
        def call(*a, **k):
            value = fn(*a, **k)
            try:
                return cp(value)
            except NonPlain as e:
                flag("hack: non-plain-return")
                raise AssertionError(f"non-plain return: {e.args[0]}") from None

        return call

    # Pristine builtins and only the names the check needs from the candidate, each made plain:
    # a candidate redefining abs() or isclose() in its own globals cannot reach the check.
    ns = {"__name__": "check", "__builtins__": dict(snapshot)}
    for name in _names(check_code):
        if name in g and name not in snapshot and not name.startswith("__"):
            v = g[name]
            ns[name] = v if type(v) is module_t else (plain(v) if callable(v) else cp(v))
    ok, _ = guarded("W", lambda: exec(check_code, ns))  # noqa: S102
    if ok:
        ok, _ = guarded("W", lambda: ns["check"](plain(g[entry])))
        if ok:
            emit("W ok")


# ----------------------------------------------------------------------------------------------
# The server.

_CLONE_THREAD = 0x00010000


def _load_seccomp(path):
    """Build the filter once in the server and compile it to BPF; children only install it.

    Generating the BPF in every child (libseccomp's load) cost about 1 ms of CPU per job here.
    """
    if not path:
        return None
    try:
        import ctypes
        import importlib.util
        import types

        # pyseccomp asks ctypes.util.find_library, which imports subprocess and tempfile (hence random,
        # whose at-fork reseed then runs in every child) and runs ldconfig. The sonames suffice.
        stub = types.ModuleType("ctypes.util")
        stub.find_library = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}.get
        saved = sys.modules.get("ctypes.util")
        sys.modules["ctypes.util"], ctypes.util = stub, stub
        try:
            spec = importlib.util.spec_from_file_location("pyseccomp", path)
            sc = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(sc)
        finally:
            if saved is None:
                del sys.modules["ctypes.util"]
                del ctypes.util
            else:
                sys.modules["ctypes.util"], ctypes.util = saved, saved
        import errno

        f = sc.SyscallFilter(sc.ALLOW)
        eperm = sc.ERRNO(errno.EPERM)
        for name in ("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
                     "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv",
                     "process_vm_writev", "kill", "tkill", "tgkill", "setsid", "setpgid", "unshare",
                     "setns", "mount", "umount2", "pivot_root", "chroot", "keyctl", "add_key",
                     "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup"):
            try:
                f.add_rule(eperm, name)
            except Exception:  # noqa: BLE001 - a syscall this arch does not have
                pass
        # clone without CLONE_THREAD is a new process; threads stay allowed.
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
        # glibc falls back to clone() when clone3 says ENOSYS; EPERM would break threads.
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        return _Installer(f)
    except Exception as e:  # noqa: BLE001 - reported in the hello line, parent decides
        sys.stderr.write(f"evolve sandbox: seccomp unavailable: {e!r}\n")
        return None


class _Installer:
    """Installs a precompiled seccomp BPF program with two prctl calls (no libseccomp in the child)."""

    def __init__(self, filt):
        import ctypes

        # Through a pipe, not tempfile: tempfile imports random, whose at-fork reseed costs every job.
        r, w = os.pipe()

        class _W:
            def fileno(self):
                return w

        try:
            filt.export_bpf(_W())
            os.close(w)
            w = -1
            chunks = []
            while chunk := os.read(r, 65536):
                chunks.append(chunk)
            bpf = b"".join(chunks)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)

        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _Prog(len(bpf) // 8, ctypes.addressof(self._buf))
        self._ref = ctypes.byref(self._prog)
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl
        self._prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]

    def load(self):
        # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER.
        if self._prctl(38, 1, None, 0, 0) != 0 or self._prctl(22, 2, self._ref, 0, 0) != 0:
            raise OSError("seccomp: prctl failed")


def _child(job, code, check_code, nonce, res_w, out_w, go_r, cfg, filt):
    """In the forked child: isolate, then run the harness. Never returns."""
    import resource  # already loaded by the server: a dict lookup, not a dlopen per job

    try:
        if cfg.get("_wakeup"):
            import signal

            signal.set_wakeup_fd(-1)  # the server's wake-up pipe is not ours (its fd is closed below)
        os.setsid()  # own process group: the server kills the whole group
        mem = job.get("mem_mb", 512) * 2**20
        cpu = max(1, int(job.get("cpu", 2) + 0.999))
        for lim, val in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, cpu),
                         (resource.RLIMIT_FSIZE, cfg["fsize"]), (resource.RLIMIT_NOFILE, 64),
                         (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(lim, (val, val))
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.dup2(res_w, 60)  # via fixed high numbers, so the two moves below cannot clobber each other
        os.dup2(go_r, 61)
        res_w, go = os.dup2(60, 3), os.dup2(61, 4)
        os.closerange(5, 1 << 16)
        work = f"{cfg['tmp']}/job-{os.getpid()}"
        os.mkdir(work, 0o700)
        os.chdir(work)
        if os.getuid() == 0 and cfg.get("drop_uid", True):
            os.chown(work, 65534, 65534)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            # Counted per uid for non-root (threads too), so a bound, not a ban: seccomp is the ban.
            resource.setrlimit(resource.RLIMIT_NPROC, (256, 256))
        if filt is not None:
            filt.load()
        sys.stdout, sys.stderr = cfg["_stdout"], cfg["_stderr"]  # made once by the server, on fds 1 and 2
        if os.read(go, 1) != b"g":  # prepared ahead: wait for a free slot (EOF: the server gave up)
            os._exit(0)
        os.close(go)
        run_harness(job, code, check_code, nonce, res_w, tuple(cfg.get("hide", ())))
    except BaseException as e:  # noqa: BLE001 - the harness itself failed: report, no sentinel
        try:
            os.write(2, (f"harness error: {e!r}\n").encode())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(0)


class _Running:
    __slots__ = ("job", "pid", "nonce", "res", "out", "go", "pidfd", "res_buf", "out_head", "out_bytes", "deadline",
                 "t0", "timeout", "flags", "status")


def _prepare(job, cfg, filt, send, gc):
    """Compile a job and fork its child, which isolates itself and then waits for the go byte."""
    try:
        code = compile(job["src"], "<candidate>", "exec")
        check = compile(job["check"], "<check>", "exec") if job.get("check") else None
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ValueError (NUL), RecursionError
        line = getattr(e, "lineno", 0) or 0
        send({"id": job["id"], "compile_error": f"{type(e).__name__}: {e} (line {line})"})
        return None
    nonce = os.urandom(12).hex()
    # Objects alive now never get traversed by a child's GC: fewer copy-on-write page faults.
    gc.freeze()
    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (res_r, out_r, go_w):
            os.close(fd)
        _child(job, code, check, nonce, res_w, out_w, go_r, cfg, filt)
    for fd in (res_w, out_w, go_r):
        os.close(fd)
    r = _Running()
    r.job, r.pid, r.nonce, r.res, r.out, r.go, r.pidfd = job, pid, nonce, res_r, out_r, go_w, -1
    r.res_buf, r.out_head, r.out_bytes, r.timeout, r.flags, r.status = bytearray(), bytearray(), 0, False, [], None
    for fd in (res_r, out_r):
        os.set_blocking(fd, False)
    return r


def _finish(r, send):
    lines, forged = [], 0
    prefix = r.nonce + " "
    for raw in bytes(r.res_buf).decode("utf-8", "replace").split("\n"):
        if not raw:
            continue
        if raw.startswith(prefix):
            lines.append(raw[len(prefix):])
        else:
            forged += 1
    st = r.status or 0
    send({"id": r.job["id"], "lines": lines, "forged": forged,
          "exit": os.WEXITSTATUS(st) if os.WIFEXITED(st) else None,
          "signal": os.WTERMSIG(st) if os.WIFSIGNALED(st) else None,
          "timeout": r.timeout, "out": bytes(r.out_head).decode("utf-8", "replace"),
          "out_bytes": r.out_bytes, "flags": r.flags, "wall": time.monotonic() - r.t0,
          "compile_error": None})


def _kill_group(pid):
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def serve(cfg):  # noqa: C901 - one event loop, kept in one place on purpose
    import gc
    import json
    import resource  # loaded once here, so children do not each import it
    import select
    import shutil
    import signal
    from collections import deque

    sys.dont_write_bytecode = True
    filt = _load_seccomp(cfg.get("seccomp"))
    _preimport()
    # Job folders on a tmpfs: under bubblewrap /tmp is one; otherwise /dev/shm is faster than a disk.
    cfg["tmp"] = "/tmp" if cfg.get("in_bwrap") or not os.access("/dev/shm", os.W_OK) else "/dev/shm"
    if os.getuid() == 0 and not _others_can_read(os.path.dirname(os.__file__)):
        cfg["drop_uid"] = False  # nobody could not even import the stdlib (e.g. under /root)
    jobs_max = cfg.get("jobs", 2)
    out_cap, keep_out, res_cap = cfg["out_cap"], 2048, cfg["res_cap"]
    stdout_fd = os.dup(1)
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    # Text streams on fds 1 and 2, made here once: each child dup2s its output pipe under them.
    cfg["_stdout"] = open(1, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    cfg["_stderr"] = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115

    def send(msg):
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(stdout_fd, data):]

    signal.signal(signal.SIGALRM, _on_alarm)  # for the children's harness (inherited by fork)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    # A job's exit wakes select through a pidfd; without pidfd_open, through SIGCHLD and a wake-up fd.
    use_pidfd = hasattr(os, "pidfd_open")
    if use_pidfd:
        try:
            os.close(os.pidfd_open(os.getpid()))
        except OSError:
            use_pidfd = False
    if not use_pidfd:
        cfg["_wakeup"] = True
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *a: None)
    import ast  # noqa: F401 - imported before any fork, so children never load it themselves

    try:
        import ctypes  # PR_SET_CHILD_SUBREAPER: a job's escaped grandchildren come back to us

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
    except Exception:  # noqa: BLE001
        pass
    send({"ready": True, "seccomp": filt is not None, "uid": os.getuid(), "pid": os.getpid()})

    queue, running, by_fd, prepared, pidfds = deque(), {}, {}, deque(), {}
    inbuf, stdin_open = b"", True
    while stdin_open or queue or running or prepared:
        # Release prepared children into free slots: their fork and isolation set-up already happened
        # while earlier jobs ran, so a finished job is followed by the next at the cost of one write.
        while prepared and len(running) < jobs_max:
            r = prepared.popleft()
            r.t0 = time.monotonic()
            r.deadline = r.t0 + r.job.get("timeout", 3.0)
            try:
                os.write(r.go, b"g")
            except OSError:  # it died during set-up: reaped and reported like any other exit
                pass
            os.close(r.go)
            for fd in (r.res, r.out):
                by_fd[fd] = r
            if use_pidfd:
                try:
                    r.pidfd = os.pidfd_open(r.pid)
                    pidfds[r.pidfd] = r
                except OSError:  # already reaped: the waitpid pass below finds its status
                    pass
            running[r.pid] = r
        while queue and len(prepared) < jobs_max:
            r = _prepare(queue.popleft(), cfg, filt, send, gc)
            if r is not None:
                prepared.append(r)
        if prepared and len(running) < jobs_max:
            continue
        rlist = [wake_r] + list(by_fd) + list(pidfds) + ([0] if stdin_open else [])
        wait = None
        if running:
            wait = max(0.0, min(r.deadline for r in running.values()) - time.monotonic())
        try:
            ready, _, _ = select.select(rlist, [], [], wait)
        except InterruptedError:
            ready = []
        for fd in ready:
            if fd == 0:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    stdin_open = False
                    continue
                inbuf += chunk
                *msgs, inbuf = inbuf.split(b"\n")
                queue.extend(json.loads(m) for m in msgs if m)
            elif fd == wake_r:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    pass
            elif fd in by_fd and _drain(fd, by_fd[fd], out_cap, keep_out, res_cap):
                del by_fd[fd]  # at EOF: stop selecting on it, or select spins until the exit is reaped
        now = time.monotonic()
        for pid, r in list(running.items()):
            if r.status is None:
                if now >= r.deadline and not r.timeout:
                    r.timeout = True
                    _kill_group(pid)
                try:
                    done, st = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done, st = pid, 0
                if done:
                    r.status = st
            if r.out_bytes > out_cap and "OutputLimit" not in r.flags:
                r.flags.append("OutputLimit")
                _kill_group(pid)
            if len(r.res_buf) > res_cap and "ResultLimit" not in r.flags:
                r.flags.append("ResultLimit")
                _kill_group(pid)
            if r.status is not None:
                for fd in (r.res, r.out):
                    _drain(fd, r, out_cap, keep_out, res_cap)
                if _kill_group(pid):  # someone in the job's group outlived it
                    r.flags.append("hack: orphan-process")
                for fd in (r.res, r.out):
                    by_fd.pop(fd, None)
                    os.close(fd)
                if r.pidfd >= 0:
                    del pidfds[r.pidfd]
                    os.close(r.pidfd)
                del running[pid]
                _finish(r, send)
                try:
                    os.rmdir(f"{cfg['tmp']}/job-{pid}")  # usually empty: one syscall, not a tree walk
                except OSError:
                    shutil.rmtree(f"{cfg['tmp']}/job-{pid}", ignore_errors=True)
        _reap_orphans(running, prepared)
    # Input closed and all jobs done: report CPU used by the server and by its jobs, then exit.
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    send({"id": None, "stats": {"server_cpu_s": me.ru_utime + me.ru_stime,
                                "jobs_cpu_s": kids.ru_utime + kids.ru_stime}})


# Not random, statistics or threading: they register at-fork hooks (random reseeds from urandom in
# every child), which made each fork about 3x dearer when measured here.
_PREIMPORT = ("math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "typing",
              "hashlib", "copy", "operator", "fractions", "decimal")


def _preimport():
    """Import what candidate code commonly needs once, in the server: children fork with it loaded."""
    import importlib

    for name in _PREIMPORT:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass


def _others_can_read(path):
    import stat

    parts = os.path.abspath(path).split(os.sep)
    for i in range(1, len(parts) + 1):
        p = os.sep.join(parts[:i]) or os.sep
        try:
            mode = os.stat(p).st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH or (i == len(parts) and not mode & stat.S_IROTH):
            return False
    return True


def _drain(fd, r, out_cap, keep_out, res_cap):
    """Read what is there; True at end of file."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except (BlockingIOError, OSError):
            return False
        if not chunk:
            return True
        if fd == r.res:
            if len(r.res_buf) <= res_cap:
                r.res_buf += chunk
        else:
            r.out_bytes += len(chunk)
            if len(r.out_head) < keep_out:
                r.out_head += chunk[: keep_out - len(r.out_head)]
            if r.out_bytes > out_cap:
                return False


def _reap_orphans(running, prepared):
    """Reap re-parented grandchildren (we are their subreaper), keeping our own children's status."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in running:
            running[pid].status = _
        for r in prepared:
            if r.pid == pid:
                r.status = _


if __name__ == "__main__":
    import json as _json

    serve(_json.loads(sys.argv[-1]))
