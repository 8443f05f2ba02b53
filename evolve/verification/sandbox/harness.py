"""The in-child harness: runs after rlimits, uid drop and seccomp, in the forked child.

Concatenated after codec.py into the fork-server's source; ``run_harness`` never returns results
by value, only as ``<nonce> <payload>`` lines on the result fd.
"""

import os
import sys
import time

try:  # as a package module (tests, linters); in the server source these are already defined
    from evolve.verification.sandbox.codec import NonPlain, _make_plain_copy, encode
except ImportError:
    pass

HARNESS_FILE = "<evolve-harness>"
_SPAWN_EVENTS = ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                 "os.forkpty", "pty.spawn")
_NET_EVENTS = ("socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
               "socket.gethostbyname", "socket.sendto")
# Ways to reach the harness's frames (and its nonce) that CPython audits. Not all are: see docs.
_INTROSPECTION = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
                  "sys._current_frames")


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


def _make_emitter(res_fd, nonce):
    """(emit, flag, on_timer). Lines are buffered and flushed by a 20 ms interval timer and at the
    sentinel: a quick job is one write (one server wake-up), and a job that hangs still hands over
    what it finished. Everything here is bound before candidate code runs."""
    write, join, append, clear = os.write, "".join, list.append, list.clear
    buf, busy, flags_sent = [], [False], set()

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

    return emit, flag, on_timer


def _make_hook(flag, hide):
    """The audit hook: refuses and flags what the candidate must not do (see docs/sandbox.md)."""
    type_, any_, perm, fspath, startswith = type, any, PermissionError, os.fsdecode, str.startswith
    str_t, int_t, o_write = str, int, os.O_WRONLY | os.O_RDWR | os.O_CREAT
    refused = {**{e: ("hack: spawn-process", "no processes") for e in _SPAWN_EVENTS},
               **{e: ("hack: network", "no network") for e in _NET_EVENTS},
               **{e: ("hack: introspection", "no introspection of the harness") for e in _INTROSPECTION},
               "ctypes.dlopen": ("hack: ctypes", "no ctypes")}

    def hook(event, args):
        if event == "open":
            path, mode, oflags = args
            if type_(path) is int_t:
                return
            p = fspath(path)
            if any_(h in p for h in hide):
                flag("hack: read-test-files")
                raise perm("sandbox: test files are not readable")
            writing = any_(c in mode for c in "wax+") if type_(mode) is str_t else bool((oflags or 0) & o_write)
            if writing and not (startswith(p, ("/tmp/", "/dev/shm/")) or p == "/dev/null" or not startswith(p, "/")):
                flag("hack: write-outside-tmp")
                raise perm("sandbox: writes outside tmp are not allowed")
        elif event in refused:
            name, why = refused[event]
            flag(name)
            raise perm("sandbox: " + why)
        elif event == "sys._getframe" and args[0].f_code.co_filename == HARNESS_FILE:
            flag("hack: introspection")
            raise perm("sandbox: harness frames are off limits")

    return hook


def _make_guard(emit, flag):
    """guarded(tag, fn) -> (ok, value): an exception becomes an error line (and a flag for exits)."""
    repr_, exc_info, sys_exit_t = repr, _exc_info, SystemExit

    def err_payload(tag, e, tb):
        return f"{tag} err {repr_(exc_info(e, tb))}"

    def guarded(tag, fn):
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

    return guarded, err_payload


def run_harness(job, code, check_code, nonce, res_fd, hide):
    """Run the candidate and its calls; stream ``<nonce> <payload>`` lines to ``res_fd``."""
    import builtins
    import marshal
    import signal

    # Bound before candidate code runs: patching builtins or os later changes none of these.
    enc, repr_, len_, dict_items, enumerate_, clock = encode, repr, len, dict.items, enumerate, time.perf_counter
    flushes = (sys.stdout.flush, sys.stderr.flush)
    emit, flag, on_timer = _make_emitter(res_fd, nonce)
    guarded, err_payload = _make_guard(emit, flag)
    calls = [marshal.loads(bytes.fromhex(c)) for c in job["calls"]]  # trusted: built by the parent
    snapshot = dict(builtins.__dict__)
    _ALARM[0] = on_timer  # the SIGALRM handler was installed by the server: signal.signal() in a
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)  # fresh child cost ~0.35 ms of CPU here
    sys.addaudithook(_make_hook(flag, hide))
    g = {"__name__": "candidate", "__builtins__": builtins}

    ok, _ = guarded("L", lambda: exec(code, g))  # noqa: S102 - this is the sandbox
    fn = g.get(job["entry"]) if ok else None
    if ok and not callable(fn):
        ok = False
        emit("L err " + repr_(("NameError", f"entry point {job['entry']!r} is not defined", 0)))
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
        emit(f"T {clock() - t0!r}")
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
