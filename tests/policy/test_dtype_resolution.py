"""dtype = "auto-bf16": bf16 where the CPU has native bf16 (AMX or AVX512-BF16), float32 elsewhere;
the resolved dtype and threads are recorded in each checkpoint's policy.json, and a checkpoint
loads in its recorded dtype (a resume on another machine continues as the run went straight
through). "auto" and the tiny-coder specs keep resolving as they did when runs were recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.policy import PolicySpec, load_policy
from evolve.policy.model_io import resolve_dtype_name
from evolve.policy.policy import POLICY_META
from evolve.util.cpu import cpu_has_bf16

REPO = Path(__file__).resolve().parents[2]
FLAGS = "processor\t: 0\nflags\t\t: fpu vme sse2 avx2 {extra} avx512f\n"


@pytest.mark.parametrize("extra, want", [("", False), ("avx512_bf16", True), ("amx_bf16 amx_tile", True),
                                         ("avx512bw", False)])
def test_cpu_bf16_detection_reads_the_flags(monkeypatch, extra, want):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)  # a cap in the caller's environment (an imitated AVX2 run)
    assert cpu_has_bf16(FLAGS.format(extra=extra)) is want


@pytest.mark.parametrize("cap, want", [("AVX2", False), ("avx512_core", False), ("AVX512_CORE_BF16", True),
                                       ("AVX512_CORE_AMX", True), ("", True)])
def test_a_onednn_isa_cap_below_bf16_means_no_bf16_kernels(monkeypatch, cap, want):
    # ONEDNN_MAX_CPU_ISA is a real switch of torch's oneDNN: under a cap below its bf16 ISAs the kernels are gone
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert cpu_has_bf16(FLAGS.format(extra="avx512_bf16")) is want
    assert cpu_has_bf16(FLAGS.format(extra="")) is False


def test_explicit_bf16_without_kernels_says_so_in_one_line(monkeypatch, capsys):
    from evolve.policy.model_io import warn_if_emulated_bf16
    from evolve.util.cpu import cpu_kind

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    warn_if_emulated_bf16("bfloat16", "cpu")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "emulated" in err and "no bf16 kernels" in err
    for dtype, device in (("float32", "cpu"), ("bfloat16", "cuda")):
        warn_if_emulated_bf16(dtype, device)
        assert capsys.readouterr().err == ""
    assert "capped at AVX2, no bf16 kernels" in cpu_kind()
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    warn_if_emulated_bf16("bfloat16", "cpu")
    assert (capsys.readouterr().err == "") is cpu_has_bf16()


def test_auto_keeps_its_recorded_meaning_and_auto_bf16_follows_the_cpu():
    assert resolve_dtype_name("auto", "cpu") == "float32" and resolve_dtype_name("auto", "cuda") == "bfloat16"
    assert resolve_dtype_name("auto-bf16", "cuda") == "bfloat16"
    assert resolve_dtype_name("auto-bf16", "cpu") == ("bfloat16" if cpu_has_bf16() else "float32")
    assert resolve_dtype_name("float32", "cuda") == "float32"


def test_tiny_coder_specs_stay_float32_on_one_thread():
    specs = sorted((REPO / "policies").glob("tiny-coder*.toml"))
    assert len(specs) >= 3
    for path in specs:
        spec = PolicySpec.from_toml(path)
        assert (spec.dtype, spec.threads) == ("float32", 1), path.name


def test_resolved_dtype_is_recorded_and_a_checkpoint_keeps_it(random_model_dir, tmp_path):
    import torch

    spec = PolicySpec.from_dict({"model": str(random_model_dir), "dtype": "auto-bf16", "threads": 1})
    policy = load_policy(spec)
    want = resolve_dtype_name("auto-bf16", "cpu")
    assert policy.resolved["dtype"] == want and policy.resolved["threads"] == torch.get_num_threads() == 1
    assert next(policy.model.parameters()).dtype == getattr(torch, want)
    ckpt = policy.save(tmp_path / "ckpt")
    meta = json.loads((ckpt / POLICY_META).read_text())
    assert meta["resolved"]["dtype"] == want and meta["spec"]["dtype"] == "auto-bf16"
    # As if the run had been recorded on a machine that resolved the other dtype:
    other = "float32" if want == "bfloat16" else "bfloat16"
    meta["resolved"]["dtype"] = other
    (ckpt / POLICY_META).write_text(json.dumps(meta))
    resumed = load_policy(spec, checkpoint_dir=ckpt)
    assert next(resumed.model.parameters()).dtype == getattr(torch, other)
    assert resumed.resolved["dtype"] == other
    # An older checkpoint (no "resolved"): the spec resolves as it always did.
    del meta["resolved"]
    (ckpt / POLICY_META).write_text(json.dumps(meta))
    assert load_policy(spec, checkpoint_dir=ckpt).resolved["dtype"] == want
