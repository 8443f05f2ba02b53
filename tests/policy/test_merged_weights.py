"""The LoRA merge behind every vLLM weight sync (backends/weights.py) on a real tiny Qwen2 in bf16: the
engine gets base + BA, and the trainer's frozen base weights come back bit for bit (peft's merge then
unmerge alone rounds them in bf16, so a resumed LoRA run's weights hash would not match the saved one)."""

from __future__ import annotations

import torch

from evolve.policy import PolicySpec, load_policy
from evolve.policy.backends.weights import merged_named_params


def test_merge_for_sync_leaves_the_base_weights_bit_exact(random_model_dir):
    spec = PolicySpec.from_dict({"model": str(random_model_dir), "finetune": "lora", "dtype": "bfloat16",
                                 "seed": 3, "lora": {"r": 4, "target_modules": ["q_proj", "v_proj"]}})
    pol = load_policy(spec)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for name, p in pol.model.named_parameters():
            if "lora_B" in name:  # B = 0 at init: give the adapter a delta, as training would
                p.add_(0.05 * torch.randn_like(p))
    before = pol.weights_hash()
    ids = torch.tensor([[1, 5, 9, 13, 2, 7]])
    with torch.no_grad():
        want = pol.model(input_ids=ids).logits.float()
    for _ in range(3):  # a sync per update
        with merged_named_params(pol.model) as params:
            merged = {n: t.clone() for n, t in params}  # the engine copies them inside the sync
    assert pol.weights_hash() == before
    name = next(n for n in merged if n.endswith("q_proj.weight"))
    assert "lora_" not in " ".join(merged) and "base_layer" not in name
    # what the engine received is base + BA: a plain model with these weights gives peft's logits
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(str(random_model_dir), dtype=torch.bfloat16)
    plain.load_state_dict(merged, strict=False)
    with torch.no_grad():
        got = plain(input_ids=ids).logits.float()
    base = AutoModelForCausalLM.from_pretrained(str(random_model_dir), dtype=torch.bfloat16)
    with torch.no_grad():
        off = base(input_ids=ids).logits.float()
    assert (got - want).abs().max() < 0.1 * (off - want).abs().max()
