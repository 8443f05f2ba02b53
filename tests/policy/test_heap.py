"""evolve.policy.heap: freed per-step buffers neither stay resident nor get faulted back in each step.

Each case runs in a fresh interpreter (mallopt is process-wide) and counts its own minor page faults
while it allocates, touches and frees two 3 MiB blocks (under the 4 MiB mmap threshold) 40 times:
the pattern decoding makes. With the mmap threshold fixed alone (what the HF backend did before),
glibc's trim threshold stays at 128 KiB and the freed heap top is returned to the kernel each pass.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

CHURN = """
import ctypes, resource, sys
libc = ctypes.CDLL(None)
if sys.argv[1] == "mmap-only":
    libc.mallopt(-3, 4 << 20)  # M_MMAP_THRESHOLD alone
elif sys.argv[1] == "tuned":
    from evolve.policy.heap import tune_heap
    assert tune_heap()
elif sys.argv[1] == "policy":  # the HF backend tunes the process it samples and trains in
    from evolve.policy import PolicySpec, load_policy
    load_policy(PolicySpec.from_dict({"model": sys.argv[2], "threads": 1}))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 3 << 20
def churn():
    a = libc.malloc(size); ctypes.memset(a, 1, size)
    b = libc.malloc(size); ctypes.memset(b, 1, size)
    libc.free(b); libc.free(a)
churn()  # the first pass faults the heap in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):
    churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES_PER_PASS = 2 * (3 << 20) // 4096

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


def _faults(*args: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHURN, *args], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_freed_blocks_stay_in_the_process_instead_of_being_faulted_back():
    assert _faults("mmap-only") > 20 * PAGES_PER_PASS  # trimmed and faulted back on every pass
    assert _faults("tuned") < PAGES_PER_PASS


def test_load_policy_tunes_the_heap_of_its_process(default_tiny_model):
    assert _faults("policy", str(default_tiny_model)) < PAGES_PER_PASS
