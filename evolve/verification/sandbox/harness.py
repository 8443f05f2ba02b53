"""The in-child harness: runs in a freshly forked job process after isolation, on that job's own
payload only (read from its own pipe; the fork-server never sees it).

Concatenated after codec.py into the fork-server's source. Results leave only as
``<nonce> <kind> ...`` lines on fd 3; every value in them is tagged JSON (codec.encode), within
the job's byte budget. Timings are not reported from here: the server measures the job's CPU.

Job payload (a marshalled dict, built by the trusted parent):
  {"mode": "run" | "record" | "replay", "src": program, "entry": name, "calls": [args tuple, ...],
   "limit": bytes, "check": task check source, "helpers": task helper source,
   "recorded": [encoded args, ...], "results": [(status, value), ...]}
"run" executes the candidate and calls the entry point once per test. "record" runs a task's own
check() against its trusted canonical solution and reports the arguments of every call. "replay"
runs the check in a fresh namespace (task helpers only; no candidate code at all) with the
candidate's plain results fed back in the recorded order.
"""

import os
import sys

try:  # as a package module (tests, linters); in the server source these are already defined
    from evolve.verification.sandbox.codec import NonPlain, TooLarge, decode, encode, same_types
except ImportError:
    pass

_SPAWN_EVENTS = ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                 "os.forkpty", "pty.spawn")
_NET_EVENTS = ("socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
               "socket.gethostbyname", "socket.sendto")
_INTROSPECTION = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
                  "sys._current_frames", "sys._getframe")
_REPLAY_SEED = 20240917  # record and replay seed `random` alike, so a check's random inputs repeat


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
    try:
        name = _name(_type(e))
        name = name if _type(name) is str else "Exception"
    except BaseException:  # noqa: BLE001
        name = "Exception"
    return name, msg if _type(msg) is str else "<unprintable>", line


_ALARM = [None]  # the running harness's flush, called on SIGALRM


def watch_builtins():
    """Let jobs tell whether their candidate changed builtins without copying the dict per job.

    Copying (or iterating) ``builtins.__dict__`` increfs every key and value: each sits on its own
    page of libpython's data, so each job took ~60 copy-on-write faults (~11% of a short job's) just
    for this check. Instead the server copies the dict once and each job reads the dict's version
    tag (PEP 509: CPython bumps it on every change of the dict) through ctypes, which touches none
    of the values. Only if the version moved does a job compare values, exactly as before. Returns
    (read the version, its cell, the version now, a copy of the dict) for run_harness's ``watch``,
    held in the server's config like the per-job copy was held in a local (no module global); None
    when the self-test on this interpreter (the field's offset, its bumping) fails."""
    import builtins

    try:
        import ctypes
    except Exception:  # noqa: BLE001 - no ctypes here: each job copies the dict, as before
        return None
    word = ctypes.sizeof(ctypes.c_void_p)
    if word != 8 or ctypes.sizeof(ctypes.c_ssize_t) != 8:
        return None

    def fields(d):  # PyDictObject: ob_refcnt, ob_type, ma_used, ma_version_tag
        return ctypes.c_ssize_t.from_address(id(d) + 2 * word), ctypes.c_uint64.from_address(id(d) + 3 * word)

    probe = {"a": 1}
    used, tag = fields(probe)
    v0 = tag.value
    probe["a"] = 2
    v1 = tag.value
    probe["b"] = 3
    ok = used.value == 2 and v0 != v1 != tag.value != v0
    used, tag = fields(builtins.__dict__)
    if not ok or used.value != len(builtins.__dict__):
        return None
    return tag.__class__.value.__get__, tag, tag.value, dict(builtins.__dict__)


def _on_alarm(signum, frame):
    fn = _ALARM[0]
    if fn is not None:
        fn()


def _make_emitter(res_fd, nonce):
    """(emit, flag, on_timer). Lines are buffered and flushed by a 20 ms interval timer and at the
    sentinel: a quick job is one write, and a job that hangs still hands over what it finished."""
    write, join, append, clear = os.write, "".join, list.append, list.clear
    buf, busy, flags_sent = [], [False], set()

    def flush():
        if buf:
            data = join(buf).encode("utf-8", "backslashreplace")
            clear(buf)
            while data:
                data = data[write(res_fd, data):]

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
    """The audit hook: refuses and flags what the candidate must not do (a flagging layer: the
    kernel-level namespaces, seccomp and rlimits are what enforce)."""
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
            if writing and not (startswith(p, "/tmp/") or p == "/dev/null" or not startswith(p, "/")):
                flag("hack: write-outside-tmp")
                raise perm("sandbox: writes outside tmp are not allowed")
        elif event == "sys._getframe":
            if args[0].f_code.co_filename != "<evolve-harness>":  # its own and the stdlib's are fine
                return
            flag("hack: introspection")
            raise perm("sandbox: harness frames are off limits")
        elif event in refused:
            name, why = refused[event]
            flag(name)
            raise perm("sandbox: " + why)

    return hook


def _make_guard(emit, flag, enc):
    """guarded(tag, fn) -> (ok, value): an exception becomes an error line (and a flag for exits)."""
    exc_info, sys_exit_t = _exc_info, SystemExit

    def err_line(tag, e, tb):
        return f"{tag} err {enc(exc_info(e, tb), 4096)}"

    def guarded(tag, fn):
        try:
            return True, fn()
        except sys_exit_t as e:
            flag("hack: sys-exit")
            emit(err_line(tag, e, e.__traceback__))
        except Exception as e:  # noqa: BLE001 - candidate failures are data
            emit(err_line(tag, e, e.__traceback__))
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt, custom BaseException
            flag("hack: base-exception")
            emit(err_line(tag, e, e.__traceback__))
        return False, None

    return guarded, err_line


def run_harness(job, nonce, res_fd, hide, watch=None, ack=None):
    """Run one job (see the module docstring); stream ``<nonce> <payload>`` lines to ``res_fd``.
    ``ack``: this job process's token from its keeper, sent first as ``P <ack>`` (in the first
    flush, no extra write): the parent reuses the slot only if the process its keeper reports
    ended is the one that read this payload whole (see batch._Batch._complete)."""
    import builtins
    import signal

    # Bound before any job code runs: patching builtins, os or json later changes none of these.
    enc, len_, dict_items = encode, len, dict.items
    flushes = (sys.stdout.flush, sys.stderr.flush)
    waitpid, wnohang, nochild_t = os.waitpid, os.WNOHANG, ChildProcessError
    emit, flag, on_timer = _make_emitter(res_fd, nonce)
    if ack is not None:
        emit("P " + ack)
    guarded, err_line = _make_guard(emit, flag, enc)
    limit = job.get("limit", 1 << 20)
    mode = job.get("mode", "run")
    if watch is not None and watch[0](watch[1]) == watch[2]:  # as the server copied them (watch_builtins)
        read_version, tag, version, snapshot = watch
    else:
        read_version, tag, version, snapshot = None, None, None, dict(builtins.__dict__)
    _ALARM[0] = on_timer  # the SIGALRM handler was installed by the server (inherited)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        code = compile(job["src"], "<candidate>", "exec")
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ValueError (NUL), RecursionError, MemoryError
        msg = f"{getattr(e, 'msg', None) or e} (line {getattr(e, 'lineno', 0) or 0})"
        emit("C err " + enc((type(e).__name__, msg[:300], 0), 4096))
        emit("END", True)
        return
    if mode != "run":  # no candidate code here at all: the task's check, its canonical solution, plain values
        _run_check(job, guarded, emit, enc)
        emit("END", True)
        return
    sys.addaudithook(_make_hook(flag, hide))
    g = {"__name__": "candidate", "__builtins__": builtins}
    ok, _ = guarded("L", lambda: exec(code, g))  # noqa: S102 - this is the sandbox
    fn = g.get(job["entry"]) if ok else None
    if ok and not callable(fn):
        ok = False
        emit("L err " + enc(("NameError", f"entry point {job['entry']!r} is not defined", 0), 4096))
    if ok:
        emit("L ok")
        _run_calls(job["calls"], fn, limit, guarded, emit, flag, enc, err_line)
    try:  # any process it started is its child (it is pid 1 of its own namespace): flagged, then
        waitpid(-1, wnohang)  # killed with the namespace when the job ends
        flag("hack: orphan-process")
    except nochild_t:
        pass
    except BaseException:  # noqa: BLE001
        pass
    if read_version is None or read_version(tag) != version:  # the dict changed: compare, as without the tag
        changed = [k for k, v in dict_items(builtins.__dict__) if snapshot.get(k, v) is not v]
        if changed or len_(builtins.__dict__) < len_(snapshot):
            flag("hack: monkeypatch")
    for f in flushes:  # bound before the candidate ran: its own print output, for the trace
        try:
            f()
        except Exception:  # noqa: BLE001 - a closed or broken stream
            pass
    emit("END", True)


def _run_calls(calls, fn, limit, guarded, emit, flag, enc, err_line, enumerate_=enumerate, str_=str,
               nonplain_t=NonPlain, toolarge_t=TooLarge):
    """Call the entry point once per test; one ``R i ...`` line each. Runs after the candidate's
    module code: every builtin it uses is a default argument, bound when the server started."""
    for i, args in enumerate_(calls):
        okc, value = guarded(f"R {i}", lambda a=args: fn(*a))
        if not okc:
            continue
        try:
            emit(f"R {i} ok {enc(value, limit)}")
        except nonplain_t as e:
            flag("hack: non-plain-return")
            emit(f"R {i} np {enc(str_(e.args[0])[:80])}")
        except toolarge_t:
            emit(f"R {i} big")
            break  # the rest would not fit either: the budget is per job
        except BaseException as e:  # noqa: BLE001 - e.g. RecursionError on a deep value
            emit(err_line(f"R {i}", e, None))


def _run_check(job, guarded, emit, enc):
    """record / replay: the task's own check() in a namespace made only of the task's canonical
    program (its imports, helpers and entry point: a check that names the entry point gets the
    canonical one). record: the check calls the canonical solution and each call's arguments are
    reported (before the call, which may mutate them). replay: the check gets the candidate's
    results, computed in another job, in order; its arguments must be the recorded ones (a check
    whose inputs depend on earlier results fails here, conservatively)."""
    import random

    calls = [0]
    recorded, results = job.get("recorded", []), job.get("results", [])
    ns = {"__name__": "check"}

    gold, strict = job.get("gold") or [], bool(job.get("strict"))

    def recorder(*args):
        i = calls[0]
        calls[0] += 1
        emit("A " + enc(args, 1 << 22))
        value = ns[job["entry"]](*args)
        try:  # the canonical result of call i, for strict types on replay (none when it is not plain)
            emit(f"G {i} " + enc(value, 1 << 20))
        except (NonPlain, TooLarge):
            pass
        return value

    def replayer(*args):
        i = calls[0]
        calls[0] += 1
        if i >= len(recorded) or enc(args, 1 << 22) != recorded[i]:
            raise AssertionError(f"call {i + 1}: the check's inputs differ from the recorded ones")
        status, value = results[i]
        if status == "enc":  # decoded here, in the sandbox: the parent never builds these values
            status, value = "ok", decode(value, 4 << 20)
        if status != "ok":
            raise AssertionError(f"call {i + 1}: the candidate {value}")
        if strict and i < len(gold) and gold[i] is not None and not same_types(value, decode(gold[i], 4 << 20)):
            raise AssertionError(f"call {i + 1}: the candidate's result has other types than the canonical one's")
        return value

    ok, _ = guarded("W", lambda: exec(compile(job.get("helpers", ""), "<task>", "exec"), ns))  # noqa: S102
    if ok:
        ok, _ = guarded("W", lambda: exec(compile(job["check"], "<check>", "exec"), ns))  # noqa: S102
    if ok:
        random.seed(_REPLAY_SEED)
        ok, _ = guarded("W", lambda: ns["check"](recorder if job["mode"] == "record" else replayer))
    if ok:
        emit("W ok")
