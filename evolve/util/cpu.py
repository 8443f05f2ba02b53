"""What this CPU can do, read from /proc/cpuinfo: the bf16 rule ('auto-bf16') and a one-line name for
figures and logs. Imports nothing from evolve, so policy, tiny-model shipping and benchmarks can all use it."""

from __future__ import annotations

import os
from pathlib import Path

# oneDNN ISA caps (ONEDNN_MAX_CPU_ISA) below its first bf16 ISA: with one of these set, torch's bf16 matmuls
# run emulated even on a CPU whose flags list bf16, so the cap is read as "no bf16 kernels". It is also how
# an AVX2-only machine is imitated on a bigger one (with ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2).
_ONEDNN_NO_BF16 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The flags line of /proc/cpuinfo (or of ``cpuinfo``), as a set; empty where it cannot be read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    return flags


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Native bf16 matmuls on this CPU: AMX (amx_bf16) or AVX512-BF16 in /proc/cpuinfo's flags, and no
    ONEDNN_MAX_CPU_ISA cap below them. (Measured on an AMX machine: a 512x896 @ 896x4864 matmul 1.1 TFLOP/s in
    bf16 vs 0.12 in float32 on 2 threads; without these flags bf16 is emulated and slower than float32.)"""
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper() in _ONEDNN_NO_BF16:
        return False
    return bool(cpu_flags(cpuinfo) & {"amx_bf16", "avx512_bf16"})


def cpu_kind(cpuinfo: str | None = None) -> str:
    """One line naming this CPU for figures and logs: model name and which bf16 kernels it has."""
    text = cpuinfo
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            text = ""
    model = next((ln.partition(":")[2].strip() for ln in text.splitlines() if ln.startswith("model name")), "?")
    flags = cpu_flags(text)
    isa = ("AMX-bf16" if "amx_bf16" in flags else "AVX512-bf16" if "avx512_bf16" in flags
           else "AVX512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2")
    capped = os.environ.get("ONEDNN_MAX_CPU_ISA")
    kernels = "bf16 kernels" if cpu_has_bf16(text) else "no bf16 kernels"
    return f"{model}, {isa}{f' capped at {capped}' if capped else ''}, {kernels}, {os.cpu_count()} cores"
