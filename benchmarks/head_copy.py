"""The prefill transient on a LoRA-wrapped model with Qwen2.5-Coder-0.5B's output head, with and without
``evolve.policy.head_input`` (the contiguous head input).

A random Qwen2 with the 0.5B's hidden size and vocabulary (896 x 151,936 head, untied) and one small
layer, bf16, peft LoRA on q/k/v/o as the spec: one prefill forward (``logits_to_keep=1``, as
``generate`` asks) of 32 rows x 175 tokens (the loop's chunk), each in a fresh child process, which
reports its peak RSS (VmHWM, reset after loading) and seconds. Random weights need no model lock and
show the same head copy (32 x 151,936 x 896 x 2 B = 8.1 GB) the real model paid at every prefill.

    .venv/bin/python benchmarks/head_copy.py [--rows 32] [--tokens 175] [--threads 2]

Prints name=value figures last and writes benchmarks/results/head_copy.json.
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
import json, os, sys, time, torch
rows, tokens, threads, fixed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
torch.set_num_threads(threads)
from peft import LoraConfig, get_peft_model
from transformers import Qwen2Config, Qwen2ForCausalLM
from evolve.policy.head_input import contiguous_head_input
cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=1024, num_hidden_layers=1, num_attention_heads=14,
                  num_key_value_heads=2, tie_word_embeddings=False, eos_token_id=1, pad_token_id=0)
torch.manual_seed(0)
model = get_peft_model(Qwen2ForCausalLM(cfg).to(torch.bfloat16).eval(), LoraConfig(
    r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM"))
if fixed:
    contiguous_head_input(model)
ids = torch.randint(2, 150000, (rows, tokens))
att = torch.ones_like(ids)
att[:, :10] = 0  # left padding, as the backend's chunks have
def hwm():
    return [int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0] / 2**20
before = hwm()
open("/proc/self/clear_refs", "w").write("5")
rss0 = [int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmRSS")][0] / 2**20
t = time.perf_counter()
with torch.no_grad():
    model(input_ids=ids, attention_mask=att, logits_to_keep=1)
print(json.dumps({"seconds": time.perf_counter() - t, "peak_gb": hwm(), "rss_before_gb": rss0,
                  "load_peak_gb": before, "loadavg": list(os.getloadavg())}))
"""


def run(rows: int, tokens: int, threads: int, fixed: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(tokens), str(threads), "1" if fixed else "0"],
                          capture_output=True, text=True, cwd=REPO, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"child failed: {proc.stderr.strip().splitlines()[-3:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  fixed={fixed}: {out}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=175)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    results, figures = {"loadavg_start": list(os.getloadavg())}, {}
    for fixed in (True, False):  # the fixed one first: the slow one may not be allowed to finish
        r = results["fixed" if fixed else "unfixed"] = run(args.rows, args.tokens, args.threads, fixed)
        tag = "fixed" if fixed else "unfixed"
        figures[f"prefill_{tag}_delta_gb"] = round(r["peak_gb"] - r["rss_before_gb"], 2)
        figures[f"prefill_{tag}_seconds"] = round(r["seconds"], 2)
        write_results("head_copy", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
