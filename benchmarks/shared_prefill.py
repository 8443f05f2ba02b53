"""The HF backend's shared prompt prefill (evolve/policy/backends/hf.py) on a real model's sampling: a task's
n samples computing its prompt once (``shared-prompt``) against every row computing it (``batch``, the path
before Dec 2026 and still the path of checkpoints that record none).

One process per model: load the policy (its spec's dtype and threads), one warm-up generate, then
alternate the two paths ``--repeats`` times on ``--tasks`` HumanEval chat prompts (the seed prompt
prompts/chat-coder.toml, the loop's rendering) x ``--samples`` samples of at most ``--tokens`` new tokens,
the same seed for both. Figures: each path's median seconds and the ratio, per model; how many rows drew
the same completion under both (float rounding may part a few).

    .venv/bin/python benchmarks/shared_prefill.py [--models smollm2,qwen0.5b] [--tasks 4] [--samples 8]
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

ONE_MODEL = r"""
import json, sys, time
spec_path, tasks, samples, tokens, repeats = sys.argv[1], *map(int, sys.argv[2:6])
from evolve.env.render import render_messages
from evolve.gym.chat import load_chat_suite
from evolve.policy import PolicySpec, load_policy
from evolve.policy.backends.hf import BATCH, SHARED_PROMPT
from evolve.prompt.seed import load_seed_prompt
spec = PolicySpec.from_toml(spec_path).model_dump()
spec["sampling"]["max_new_tokens"] = tokens
policy = load_policy(PolicySpec.from_dict(spec))
seed = load_seed_prompt("prompts/chat-coder.toml")
prompts = [render_messages(seed.components, t) for t in load_chat_suite("humaneval-chat")["train"][:tasks]]
backend = policy.backend
backend.generate(prompts[:1], n=2, seed=1)  # warm-up
out = {}
for rep in range(repeats):
    for path in (BATCH, SHARED_PROMPT):
        backend.prefill = path
        t0 = time.perf_counter()
        groups = backend.generate(prompts, n=samples, seed=0)
        wall = time.perf_counter() - t0
        out[path] = groups
        print(json.dumps({"repeat": rep, "path": path, "wall_s": wall,
                          "tokens": sum(len(s.completion_ids) for g in groups for s in g),
                          "prompt_tokens": [len(g[0].prompt_ids) for g in groups],
                          "dtype": policy.resolved["dtype"], "threads": policy.resolved["threads"]}), flush=True)
same = sum(a.completion_ids == b.completion_ids for ga, gb in zip(out[BATCH], out[SHARED_PROMPT])
           for a, b in zip(ga, gb))
print(json.dumps({"same_completions": same, "rows": tasks * samples}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="smollm2,qwen0.5b")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    results, figures = [], {}
    for model in args.models.split(","):
        proc = subprocess.run([sys.executable, "-c", ONE_MODEL, str(SPECS[model]), str(args.tasks),
                               str(args.samples), str(args.tokens), str(args.repeats)],
                              capture_output=True, text=True, env=env, cwd=REPO)
        if proc.returncode != 0:
            raise SystemExit(f"{model}: exited {proc.returncode}\n{proc.stderr[-3000:]}")
        rows = [{"model": model, **json.loads(ln)} for ln in proc.stdout.splitlines() if ln.startswith("{")]
        for row in rows:
            print(json.dumps(row), flush=True)
        results += rows

        def median(path: str, rows=rows) -> float:
            return statistics.median(r["wall_s"] for r in rows if r.get("path") == path)

        figures[f"{model}_batch_s"] = round(median("batch"), 2)
        figures[f"{model}_shared_s"] = round(median("shared-prompt"), 2)
        figures[f"{model}_speedup"] = round(median("batch") / median("shared-prompt"), 3)
        figures[f"{model}_same_completions"] = f"{rows[-1]['same_completions']}/{rows[-1]['rows']}"
    write_results("shared_prefill", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
