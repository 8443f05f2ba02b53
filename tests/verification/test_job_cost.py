"""What keeps a job cheap without weakening a check (issue 24, throughput): on real sandbox servers."""

from __future__ import annotations

import builtins

import pytest

from evolve.verification.sandbox.client import ForkServer, SandboxConfig
from evolve.verification.sandbox.harness import watch_builtins


def test_the_builtins_version_tag_is_read_right_on_this_interpreter():
    watch = watch_builtins()
    assert watch is not None, "the self-test failed: every job copies builtins again (~75 page faults each)"
    read, tag, version, snapshot = watch
    assert read(tag) == version and snapshot == builtins.__dict__
    builtins.__dict__["_evolve_probe"] = 1
    try:
        assert read(tag) != version
    finally:
        del builtins.__dict__["_evolve_probe"]


def test_the_server_uses_the_version_tag():
    fs = ForkServer(SandboxConfig(jobs=1))
    try:
        fs.ready()
        assert fs._proc.hello["watch"] is True
    finally:
        fs.close()


@pytest.mark.parametrize("patch", [
    "import builtins\nbuiltins.__dict__['len'] = lambda x: 0\n",
    "import builtins\ndel builtins.sorted\n",
    "import builtins\nbuiltins.max = min\n",
])
def test_a_changed_or_deleted_builtin_is_still_flagged(verifier, add_task, patch):
    ok = verifier.verify(add_task, "def add(a, b):\n    return a + b\n")
    r = verifier.verify(add_task, patch + "def add(a, b):\n    return a + b\n")
    after = verifier.verify(add_task, "def add(a, b):\n    return a + b\n")
    assert ok.passed and after.passed
    assert "hack: monkeypatch" in r.hack_flags and not r.passed


def test_an_added_name_or_a_restored_builtin_is_not_flagged_as_before(verifier, add_task):
    body = ("import builtins\nbuiltins.helper_x = 1\nold = builtins.len\nbuiltins.len = None\nbuiltins.len = old\n"
            "def add(a, b):\n    return a + b\n")
    r = verifier.verify(add_task, body)
    assert r.passed and not r.hack_flags


def _run_bpf(prog: bytes, data: bytes) -> int:
    """A classic-BPF interpreter for what libseccomp emits: the action for one seccomp_data."""
    import struct

    insns = [struct.unpack_from("<HBBI", prog, i) for i in range(0, len(prog), 8)]
    a, x, mem, pc = 0, 0, [0] * 16, 0
    for _ in range(10_000):
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            a = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # ret k
            return k
        elif code in (0x15, 0x25, 0x35, 0x45):  # jeq, jgt, jge, jset k
            cond = {0x15: a == k, 0x25: a > k, 0x35: a >= k, 0x45: bool(a & k)}[code]
            pc += jt if cond else jf
        elif code == 0x05:  # ja k
            pc += k
        elif code == 0x54:  # and k
            a &= k
        elif code == 0x02:  # st M[k]
            mem[k] = a
        elif code == 0x60:  # ld M[k]
            a = mem[k]
        elif code == 0x07:  # tax
            x = a
        elif code == 0x87:  # txa
            a = x
        else:
            raise AssertionError(f"unknown BPF opcode {code:#x}")
    raise AssertionError("no return")


def test_the_tree_shaped_filter_decides_every_syscall_as_the_list_did():
    import os
    import struct

    from evolve.verification.sandbox.seccomp import compile_filter

    if os.uname().machine != "x86_64":
        pytest.skip("the arch constant below is x86_64's")
    tree, why = compile_filter(optimize=True)
    flat, _ = compile_filter(optimize=False)
    assert tree is not None and flat is not None, why
    assert tree != flat, "the tree option had no effect: this test would compare a program with itself"
    args_sets = [(0,) * 6, (0x10000,) + (0,) * 5, (0x11,) + (0,) * 5, (0x1200011,) + (0,) * 5,
                 *[(3, cmd, 0, 0, 0, 0) for cmd in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16, 36, 37, 38, 1031, 1032)],
                 (3, 0x8901, 0, 0, 0, 0), (3, 0x8902, 0, 0, 0, 0), (3, 0x5401, 0, 0, 0, 0),
                 (3, (1 << 32) | 8, 0, 0, 0, 0), ((1 << 40) | 0x10000,) + (0,) * 5]
    denied = 0
    for arch in (0xC000003E, 0x40000003):  # x86_64, i386 (a foreign arch: both must refuse it alike)
        for nr in [*range(0, 470), *range(0x40000000, 0x40000010)]:
            for args in args_sets:
                data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
                got, want = _run_bpf(tree, data), _run_bpf(flat, data)
                assert got == want, (hex(arch), nr, args, hex(got), hex(want))
                denied += want != 0x7FFF0000
    assert denied > 100 * len(args_sets)  # the denied calls are really in there (EPERM / ENOSYS)


def test_the_server_code_is_compiled_once_per_process_under_the_harness_name():
    import marshal

    from evolve.verification.sandbox import client

    code = client.server_code()
    assert client.server_code() is code  # no compile per server start
    assert marshal.loads(code).co_filename == "<evolve-harness>"  # what the audit hook's frame check names



def test_a_short_job_stays_within_its_page_fault_budget():
    """Each page a job writes after its fork is copied (a fault, ~2-4 us here): the measure of what the
    harness touches. Measured here: ~430 per trivial job; the budget catches the regressions seen while
    tuning (a per-job copy of builtins: +60; a compiler made anew in each job: +100)."""
    def faults(n: int) -> int:
        jobs = [{"mode": "run", "src": "def f(x):\n    return x + 1\n", "entry": "f", "calls": [(i,) for i in range(5)],
                 "timeout": 6.0, "cpu": 5.0, "mem_mb": 1024}] * n
        fs = ForkServer(SandboxConfig(jobs=2))
        try:
            replies = fs.run(jobs)
        finally:
            fs.close()
        assert all(r["lines"][-1] == "END" for r in replies)
        return fs.last_stats["jobs_minflt"]  # the server's children: jobs, prepared ones, keepers

    per_job = (faults(120) - faults(20)) / 100  # the keepers' and prepared jobs' own faults cancel out
    assert 100 < per_job < 475, per_job


def _one_value_per_job(src: str, n: int) -> list[str]:
    fs = ForkServer(SandboxConfig(jobs=1))
    try:
        replies = fs.run([{"mode": "run", "src": src, "entry": "f", "calls": [()], "timeout": 6.0, "cpu": 5.0,
                           "mem_mb": 1024}] * n)
    finally:
        fs.close()
    assert all(r["lines"][-1] == "END" for r in replies), replies
    return [r["lines"][-2] for r in replies]


def test_random_is_loaded_once_and_every_job_starts_it_from_the_same_fixed_state():
    """random is loaded by the server (each record/replay job imported it: ~1.8 ms, ~400 faults) without its
    at-fork hook (a reseed from urandom in every child, +33 faults per fork): jobs start from one fixed
    state, on every server, and a job's own seed still rules."""
    import random

    src = "import random, sys\ndef f():\n    return [random.random(), random.random()]\n"
    first, second = _one_value_per_job(src, 3), _one_value_per_job(src, 2)
    rng = random.Random(0)  # jobenv._RANDOM_SEED
    assert set(first) == set(second) == {f"R 0 ok [{rng.random()!r},{rng.random()!r}]"}
    seeded = _one_value_per_job("import random\ndef f():\n    random.seed(7)\n    return random.random()\n", 1)
    assert seeded == [f"R 0 ok {random.Random(7).random()!r}"]


def test_no_job_process_carries_modules_only_the_fallback_needs():
    """shutil (bz2, lzma, zlib: six shared libraries, 30 mappings) is imported by a keeper only without
    namespaces: every job fork copied those mappings and every keeper's start-up paid ~2.3 ms for it."""
    src = "import sys\ndef f():\n    return sorted(m for m in ('shutil', 'bz2', 'lzma', 'zlib') if m in sys.modules)\n"
    assert _one_value_per_job(src, 1) == ["R 0 ok []"]
