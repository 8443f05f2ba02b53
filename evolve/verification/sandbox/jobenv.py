"""A job's own environment, set up by the job before its payload: its slot's pipes reset, its pid
namespace's task limit; and what the server loads once for every job to inherit. Standard library
only: concatenated into the fork-server's source after harness.py (see client.server_source),
never imported by the sandboxed side from the package.
"""

import os

_TASKS_MAX = 301  # the job's pid namespace's pid_max: at most ~300 tasks (threads) per job; the kernel's floor


def _limit_tasks(cfg):
    """Cap the tasks (threads) of this job's own pid namespace: pid_max is per pid namespace since
    Linux 6.14, and a write through the server's /proc/sys/kernel folder reaches the writer's own
    namespace. Only as pid 1 of a fresh namespace (never the server's or the host's)."""
    dfd = cfg.get("_sysk")
    if dfd is None or os.getpid() != 1:
        return
    fd = os.open("pid_max", os.O_WRONLY, dir_fd=dfd)
    try:
        os.write(fd, b"%d" % _TASKS_MAX)
    finally:
        os.close(fd)


def _reset_pipes(pay, res, out):
    """The slot's pipes are shared with every earlier job of the slot (same open file descriptions):
    undo whatever one of them changed. Status flags (O_NONBLOCK, O_APPEND, O_ASYNC, O_DIRECT) back
    to none, capacities back to what the parent made (a job may grow or shrink its pipes)."""
    import fcntl

    for fd, size in ((pay, 1 << 20), (res, 1 << 16), (out, 1 << 16)):
        try:
            fcntl.fcntl(fd, fcntl.F_SETFL, 0)
            if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) != size:
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
        except OSError:
            pass


def _per_ns_pid_max():
    """pid_max is per pid namespace from Linux 6.14 on; before, a write would change the host's."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 14)


def _sysctl_dir(cfg, kern):
    """An fd on /proc/sys/kernel for the jobs' pid_max, or None. Under bubblewrap the view's /proc
    exists only for this: the folder is opened, then /proc is unmounted, so no job sees a /proc."""
    dfd = None
    if cfg.get("ns") and _per_ns_pid_max():
        try:
            dfd = os.open("/proc/sys/kernel", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            dfd = None
    if cfg.get("in_bwrap") and os.path.isdir("/proc/self") and kern.umount2(b"/proc", 2) != 0:
        raise kern.err("umount /proc")  # MNT_DETACH, on every kernel: never leave the view's /proc in place
    return dfd


# What candidate code commonly imports (typing alone costs a child ~5 ms). Not random, statistics or
# threading: they register at-fork hooks (random reseeds from urandom in every child), which made
# each fork about 3x dearer when measured here; and not hashlib, decimal, fractions: each module
# loaded here makes every fork a little dearer, and few candidates use them.
_PREIMPORT = ("math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "typing",
              "marshal", "json", "json.encoder", "resource", "fcntl", "signal")


# Compiled once here so that the compiler's lazily made state (the parser's and the AST types') exists
# before any fork: every job compiles its candidate, and made that state anew (~100 page faults) once
# the server's own code stopped being compiled here (it comes marshalled: client._BOOT).
_WARM = "import typing\nclass C:\n    x: int = 0\ndef f(a, *b, c=1, **d):\n    return [a for a in b if a] or {c: d}\n"


# Every job starts `random` from this state (see _preimport_random).
_RANDOM_SEED = 0


def _preimport():
    import importlib

    for name in _PREIMPORT:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass
    _preimport_random()
    compile(_WARM, "<warm>", "exec")


def _preimport_random():
    """``random``, loaded once here: every record and replay job imports it (so do some candidates), and
    importing it in a forked job cost ~1.8 ms and ~400 page faults (12 such jobs in a cold HumanEval
    batch, 6 in a warm one). Loaded without the at-fork hook it registers, which reseeds from urandom in
    every child (+33 faults, +0.2 ms per fork, measured), and seeded with a fixed seed instead: every
    job starts ``random`` from the same state, so a candidate's own randomness is reproducible (before,
    each job's import drew a fresh seed). Record and replay jobs seed it themselves, as before."""
    import sys

    if "random" in sys.modules:  # imported with its hook by someone else: leave it be
        return
    register = os.register_at_fork
    os.register_at_fork = lambda **hooks: None
    try:
        import random
    except Exception:  # noqa: BLE001
        return
    finally:
        os.register_at_fork = register
    random.seed(_RANDOM_SEED)
