"""glibc heap settings (evolve/policy/heap.py) on a real model's sampling: the shipped settings against
the mmap threshold fixed alone (the HF backend before Dec 2026, which left the trim threshold at 128 KiB).

Each arm runs in its own process (mallopt is process-wide), alternating arm by arm ``--repeats`` times:
load the policy (SmolLM2-135M-Instruct by default, its spec's dtype and threads), one warm-up generate,
then ``--rows`` prompts x 1 sample of ``--tokens`` tokens, timed. Minor page faults and system time are
counted over the timed generate only. Figures: each arm's median tokens/s and faults, and the ratio.

    .venv/bin/python benchmarks/heap.py [--model smollm2|qwen0.5b] [--rows 8] [--tokens 48] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

SPECS = {"smollm2": REPO / "policies" / "smollm2-135m-instruct.toml",
         "qwen0.5b": REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml"}

ONE_ARM = r"""
import ctypes, json, resource, sys, time
arm, spec_path, rows, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import evolve.policy.heap as heap
if arm == "mmap-only":  # the backend's setting before: M_MMAP_THRESHOLD alone, trim left at 128 KiB
    ctypes.CDLL(None).mallopt(heap.M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD)
    heap._tuned = True  # the backend's tune_heap() is then a no-op
from evolve.policy import PolicySpec, load_policy
spec = PolicySpec.from_toml(spec_path).model_dump()
spec["sampling"]["max_new_tokens"] = tokens
spec["sampling"]["stop_after_code_block"] = False
policy = load_policy(PolicySpec.from_dict(spec))
prompts = [[{"role": "user", "content": f"Write a Python function f{i}(xs) that returns the {i}-th "
             "smallest element of the list xs."}] for i in range(rows)]
policy.generate(prompts[:2], n=1, seed=1)  # warm-up
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
out = policy.generate(prompts, n=1, seed=0)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
toks = sum(len(s.completion_ids) for g in out for s in g)
print(json.dumps({"arm": arm, "tokens": toks, "wall_s": wall, "tokens_per_s": toks / wall,
                  "minor_faults": r1.ru_minflt - r0.ru_minflt, "sys_s": r1.ru_stime - r0.ru_stime,
                  "user_s": r1.ru_utime - r0.ru_utime, "threads": policy.resolved["threads"],
                  "dtype": policy.resolved["dtype"]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SPECS), default="smollm2")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    results = []
    for rep in range(args.repeats):
        for arm in ("mmap-only", "shipped"):
            proc = subprocess.run([sys.executable, "-c", ONE_ARM, arm, str(SPECS[args.model]), str(args.rows),
                                   str(args.tokens)], capture_output=True, text=True, env=env, cwd=REPO, check=True)
            row = {"repeat": rep, **json.loads(proc.stdout.strip().splitlines()[-1])}
            print(json.dumps(row), flush=True)
            results.append(row)

    def median(arm: str, key: str) -> float:
        return statistics.median(r[key] for r in results if r["arm"] == arm)

    figures = {f"{arm}_{key}": round(median(arm, key), 3) for arm in ("mmap-only", "shipped")
               for key in ("tokens_per_s", "minor_faults", "sys_s")}
    figures["speedup"] = round(median("shipped", "tokens_per_s") / median("mmap-only", "tokens_per_s"), 3)
    write_results(f"heap_{args.model}", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
