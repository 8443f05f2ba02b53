"""Peak memory of one GRPO update at the loop's shape on models with Qwen2.5-Coder-0.5B's shapes.

A random Qwen2 with the 0.5B's config (hidden 896, vocab 151,936, MLP 4864, 14/2 heads) but L
decoder layers (random weights need no model lock and load in seconds), bf16, the 0.5B spec's LoRA;
one ``policy.update`` of 8 groups x 4 rows, prompts ~175 tokens, completions up to 512, rewards 1/0
alternating (every group trains). Run at two depths, the per-layer slope extrapolates to 24 layers
(activations kept for the backward grow linearly with depth; the head, the sliced log-probs and the
embedding do not). Each run is a fresh child process reporting VmHWM (reset after loading).

    .venv/bin/python benchmarks/update_memory.py [--micro 2] [--layers 2 4] [--tokens 512]

Prints name=value figures last and writes benchmarks/results/update_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

CHILD = r"""
import json, os, sys, tempfile, time, torch
from transformers import Qwen2Config, Qwen2ForCausalLM, AutoTokenizer
from evolve.policy import PolicySpec, load_policy
from evolve.rollout import Rollout
from evolve.policy.randmodel import build_random_model
L, mb, C = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=L, num_attention_heads=14,
                  num_key_value_heads=2, tie_word_embeddings=False, max_position_embeddings=32768, rope_theta=1e6,
                  eos_token_id=151645, pad_token_id=151643)
d = tempfile.mkdtemp()
build_random_model(d + "/tok")  # a tokenizer (ids are drawn below, never decoded)
torch.manual_seed(0)
Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(d + "/m")
AutoTokenizer.from_pretrained(d + "/tok").save_pretrained(d + "/m")
spec = PolicySpec.from_toml(sys.argv[4]).model_dump()
spec.update(model=d + "/m", model_sha256=None)
spec["grpo"]["micro_batch_size"] = mb
spec["sampling"]["max_new_tokens"] = C
policy = load_policy(PolicySpec.from_dict(spec))
g = torch.Generator().manual_seed(0)
groups = [[Rollout(task_id=f"t{gi}", group=gi, sample_index=i, prompt_version="p", weights_version="w", messages=[],
                   prompt_text="", completion="", reward=float(i % 2),
                   prompt_ids=torch.randint(10, 150000, (175 - gi,), generator=g).tolist(),
                   completion_ids=torch.randint(10, 150000, (C - 3 * i,), generator=g).tolist(), logprobs=[])
           for i in range(4)] for gi in range(8)]
def status(key):
    return [int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith(key)][0] / 2**20
open("/proc/self/clear_refs", "w").write("5")
before, t = status("VmRSS"), time.perf_counter()
stats = policy.update(groups)
print(json.dumps({"layers": L, "micro": mb, "tokens": stats.n_tokens, "seconds": time.perf_counter() - t,
                  "rss_before_gb": before, "peak_gb": status("VmHWM"), "loadavg": list(os.getloadavg())}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--micro", type=int, default=2)
    ap.add_argument("--layers", type=int, nargs=2, default=[2, 4])
    ap.add_argument("--tokens", type=int, default=512)
    args = ap.parse_args()
    spec = REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    results, figures = {"loadavg_start": list(os.getloadavg()), "runs": []}, {}
    for layers in args.layers:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(layers), str(args.micro), str(args.tokens), str(spec)],
                              capture_output=True, text=True, cwd=REPO, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"child failed: {proc.stderr.strip().splitlines()[-3:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"  {r}", flush=True)
        results["runs"].append(r)
        figures[f"update_L{layers}_peak_gb"] = round(r["peak_gb"], 2)
        write_results("update_memory", args=vars(args), results=results, figures=figures)
    (a, b) = results["runs"]
    slope = (b["peak_gb"] - a["peak_gb"]) / (b["layers"] - a["layers"])
    figures.update({"update_per_layer_gb": round(slope, 3), "micro_batch_size": args.micro,
                    "update_L24_extrapolated_peak_gb": round(a["peak_gb"] + slope * (24 - a["layers"]), 2),
                    "goal_gb": 6})
    write_results("update_memory", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
