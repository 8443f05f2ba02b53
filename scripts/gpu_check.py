"""The GPU path, checked end to end on SmolLM2-135M (no hub): see scripts/gpu_check.sh.

NEVER RUN: no GPU was lent while this was written. Steps (each prints `check <name>: PASS|FAIL ...`):
  1. hf-cuda     HF generation with the policy on CUDA (dtype auto -> bf16)
  2. grpo-step   one GRPO update on CUDA (rewards alternate 1/0 inside each group so every group trains:
                 this checks the update runs and moves the weights, not that it learns)
  3. vllm-gen    in-process vLLM generation (external_launcher, processed logprobs), LoRA policy
  4. logprobs    vLLM's sampled-token log-probs vs HF's on the same tokens, same weights:
                 mean |diff| <= TOL_MEAN and 99th percentile <= TOL_P99 (nats; bf16 on both sides)
  5. weight-sync after an update (lr raised so the change is visible), vLLM agrees with the *new* HF
                 log-probs within the same tolerance, and HF's log-probs moved by more than TOL_MEAN
Writes runs/gpu_check.json. Exit 0 only when every check passed.
`--cpu-dry-run` runs steps 1-2 on the CPU in float32 and checks HF's own sampled log-probs against the
recomputed ones (what the CPU machines can check of this script; it is not the GPU check).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TOL_MEAN, TOL_P99 = 0.05, 0.5
RESULTS: dict = {"checks": {}, "tolerance": {"mean_abs_nats": TOL_MEAN, "p99_abs_nats": TOL_P99}}


def check(name: str, ok: bool, **info) -> None:
    RESULTS["checks"][name] = {"pass": bool(ok), **info}
    print(f"check {name}: {'PASS' if ok else 'FAIL'} {json.dumps(info)}", flush=True)


def spec_for(backend: str, finetune: str, lr: float = 2e-5, device: str = "cuda"):
    from evolve.policy import PolicySpec

    base = PolicySpec.from_toml(REPO / "policies" / "smollm2-135m-instruct.toml").model_dump()
    base.update(backend=backend, finetune=finetune, device=device, dtype="auto")
    base["sampling"].update(top_p=1.0, stop_after_code_block=False, max_new_tokens=96, n=4)
    base["optimizer"]["lr"] = lr
    base["vllm"] = {"gpu_memory_utilization": 0.3, "max_model_len": 2048}
    return PolicySpec.from_dict(base)


def prompts(n: int = 4):
    from evolve.gym.chat import load_chat_suite
    from evolve.prompt import load_seed_prompt
    from evolve.prompt.candidate import render_messages

    comp = dict(load_seed_prompt(REPO / "prompts" / "chat-coder.toml").components)
    return [render_messages(comp, t) for t in load_chat_suite("tiny-coder-chat")["heldout"][:n]]


def groups_from(samples) -> list:
    from evolve.rollout import Rollout

    out = []
    for g, group in enumerate(samples):
        out.append([Rollout(task_id=f"t{g}", group=g, sample_index=i, prompt_version="p", weights_version="w",
                            messages=[], prompt_text=s.prompt_text, completion=s.text, purpose="train",
                            prompt_ids=list(s.prompt_ids), completion_ids=list(s.completion_ids),
                            logprobs=list(s.logprobs), reward=float(i % 2)) for i, s in enumerate(group)])
    return out


def hf_logprobs(policy, samples) -> list[list[float]]:
    """HF's log-probs of exactly the tokens another engine sampled (same layout as the update)."""
    import torch

    from evolve.policy.updater import _Row, collate, completion_logprobs

    rows = [_Row(s.prompt_ids, s.completion_ids, [], 0.0) for group in samples for s in group]
    dev = next(policy.model.parameters()).device
    t = [x.to(dev) for x in collate(rows, policy.tokenizer.pad_token_id)]
    with torch.no_grad():
        lp = completion_logprobs(policy.model, *t, policy.spec.sampling.temperature).float().cpu()
    return [lp[i, :len(r.completion_ids)].tolist() for i, r in enumerate(rows)]


def agreement(samples, hf) -> dict:
    import numpy as np

    d = np.abs(np.concatenate([np.array(s.logprobs) - np.array(h)
                               for s, h in zip([s for g in samples for s in g], hf, strict=True)]))
    return {"tokens": int(d.size), "mean_abs": float(d.mean()), "p99_abs": float(np.percentile(d, 99)),
            "max_abs": float(d.max())}


def cpu_dry_run() -> int:
    from evolve.policy import load_policy

    pol = load_policy(spec_for("hf", "full", device="cpu"))
    out = pol.generate(prompts(2), n=2, seed=0)
    agree = agreement(out, hf_logprobs(pol, out))
    check("hf-self-logprobs", agree["mean_abs"] <= 1e-3, **agree)
    before = pol.weights_hash()
    stats = pol.update(groups_from(out))
    check("grpo-step", stats.n_trained_groups > 0 and pol.weights_hash() != before,
          trained_groups=stats.n_trained_groups, loss=stats.loss, seconds=round(stats.seconds, 3))
    return 0 if all(c["pass"] for c in RESULTS["checks"].values()) else 1


def main() -> int:
    import torch

    if "--cpu-dry-run" in sys.argv:
        return cpu_dry_run()
    if not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA device", file=sys.stderr)
        return 2
    from evolve.policy import load_policy

    RESULTS["device"] = torch.cuda.get_device_name(0)
    msgs = prompts()
    t0 = time.perf_counter()
    pol = load_policy(spec_for("hf", "full"))
    out = pol.generate(msgs, n=4, seed=0)
    dt = time.perf_counter() - t0
    dev = str(next(pol.model.parameters()).device)
    toks = sum(len(s.completion_ids) for g in out for s in g)
    check("hf-cuda", dev.startswith("cuda") and toks > 0, device=dev, tokens=toks, seconds=round(dt, 2),
          dtype=str(next(pol.model.parameters()).dtype))
    before = pol.weights_hash()
    stats = pol.update(groups_from(out))
    check("grpo-step", stats.n_trained_groups > 0 and pol.weights_hash() != before,
          trained_groups=stats.n_trained_groups, loss=stats.loss, seconds=round(stats.seconds, 3))
    del pol
    torch.cuda.empty_cache()

    vpol = load_policy(spec_for("vllm", "lora", lr=1e-3))
    t0 = time.perf_counter()
    vout = vpol.generate(msgs, n=4, seed=1)
    vtoks = sum(len(s.completion_ids) for g in vout for s in g)
    check("vllm-gen", vtoks > 0 and all(len(s.logprobs) == len(s.completion_ids) for g in vout for s in g),
          tokens=vtoks, seconds=round(time.perf_counter() - t0, 2))
    agree = agreement(vout, hf_logprobs(vpol, vout))
    check("logprobs", agree["mean_abs"] <= TOL_MEAN and agree["p99_abs"] <= TOL_P99, **agree)

    old_hf = hf_logprobs(vpol, vout)
    for _ in range(3):  # a few steps at a raised lr so the distribution visibly moves
        vpol.update(groups_from(vout))  # Policy.update pushes the weights into vLLM after each step
    new_hf = hf_logprobs(vpol, vout)
    import numpy as np

    moved = float(np.mean(np.abs(np.concatenate([np.array(a) - np.array(b) for a, b in zip(old_hf, new_hf,
                                                                                          strict=True)]))))
    vout2 = vpol.generate(msgs, n=4, seed=2)
    agree2 = agreement(vout2, hf_logprobs(vpol, vout2))
    check("weight-sync", moved > TOL_MEAN and agree2["mean_abs"] <= TOL_MEAN and agree2["p99_abs"] <= TOL_P99,
          hf_moved_mean_abs=moved, **agree2)
    vpol.close()
    (REPO / "runs").mkdir(exist_ok=True)
    (REPO / "runs" / "gpu_check.json").write_text(json.dumps(RESULTS, indent=1))
    ok = all(c["pass"] for c in RESULTS["checks"].values())
    print(f"gpu_check: {'ALL PASS' if ok else 'FAILED'} ({len(RESULTS['checks'])} checks)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
