"""Peak resident memory of the 0.5B policy (policies/qwen2.5-coder-0.5b-instruct.toml) at the loop's
batch shape: 32 sequences (8 tasks x G=4) in one ``generate`` chunk, up to 512 new tokens each.

1. ``evolve eval --policy SPEC --suite humaneval-chat --split heldout --tasks 8 --samples 4`` with
   ``max_new_tokens = 512`` and ``chunk_size = 32`` (the spec's code-block stop on, as the loop runs);
2. one loop-shaped generation: ``policy.generate`` of 8 train tasks x 4 rows with the code-block stop
   off, so rows run until EOS or 512 tokens, then one GRPO update on those 32 rows (rewards 1/0
   alternating in each group, so every group trains; the spec's micro-batch size). The child reports
   the peak of each phase apart (VmHWM, reset between phases through /proc/self/clear_refs).

Each runs in a fresh child process; a small wrapper process reports the child's peak RSS
(``getrusage(RUSAGE_CHILDREN).ru_maxrss``). The goal is <= 6 GB. The old backend (every step's
logits kept) is not run at this shape: it would need 32 x 512 x 151,936 x 4 B = 9.96 GB for the
logits alone, plus as much for their log-softmax (the issue saw it killed at 22.6 GB at 384 tokens).

    .venv/bin/python benchmarks/memory.py [--tokens 512] [--tasks 8] [--g 4]

Prints name=value figures last and writes benchmarks/results/memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

SPEC = REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml"
WRAP = ("import json, resource, subprocess, sys, time; t = time.time(); rc = subprocess.run(sys.argv[1:]).returncode; "
        "print(json.dumps({'rc': rc, 'peak_rss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
        "'seconds': time.time() - t}))")
GEN = r"""
import json, sys, time
from evolve.gym.chat import load_chat_suite
from evolve.policy import PolicySpec, load_policy
from evolve.prompt import load_seed_prompt
from evolve.prompt.candidate import render_messages
spec = PolicySpec.from_toml(sys.argv[1])
policy = load_policy(spec)
comp = dict(load_seed_prompt("prompts/humaneval.toml").components)
msgs = [render_messages(comp, t) for t in load_chat_suite("humaneval-chat")["train"][:int(sys.argv[2])]]
def hwm_gb(reset=False):
    kb = [int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0]
    if reset:  # Linux: writing 5 to clear_refs resets the peak (VmHWM) to the current RSS
        open("/proc/self/clear_refs", "w").write("5")
    return kb / 2**20
load_peak = hwm_gb(reset=True)
t = time.time()
groups = policy.generate(msgs, n=int(sys.argv[3]), seed=0)
gen_s, gen_peak = time.time() - t, hwm_gb(reset=True)
lens = [len(s.completion_ids) for g in groups for s in g]
from evolve.rollout import Rollout
rollouts = [[Rollout(task_id=f"t{gi}", group=gi, sample_index=i, prompt_version="p", weights_version="w", messages=[],
                     prompt_text=s.prompt_text, completion=s.text, reward=float(i % 2), prompt_ids=list(s.prompt_ids),
                     completion_ids=list(s.completion_ids), logprobs=list(s.logprobs)) for i, s in enumerate(g)]
            for gi, g in enumerate(groups)]
t = time.time()
stats = policy.update(rollouts)  # rewards alternate 1/0 in each group: every group trains
upd_s, upd_peak = time.time() - t, hwm_gb()
print("GEN " + json.dumps({"rows": len(lens), "tokens": sum(lens), "max_len": max(lens), "seconds": gen_s,
                           "load_peak_gb": load_peak, "generate_peak_gb": gen_peak, "update_peak_gb": upd_peak,
                           "update_seconds": upd_s, "update_tokens": stats.n_tokens,
                           "micro_batch_size": policy.spec.grpo.micro_batch_size, "resolved": policy.resolved}))
"""


def spec_file(tokens: int, chunk: int, stop: bool, dest: Path) -> Path:
    """The shipped spec with the benchmark's shape (line edits keep every other setting as shipped)."""
    lines = []
    for line in SPEC.read_text().splitlines():
        key = line.split("=")[0].strip()
        if key == "max_new_tokens":
            line = f"max_new_tokens = {tokens}"
        elif key == "chunk_size":
            line = f"chunk_size = {chunk}"
        elif key == "stop_after_code_block":
            line = f"stop_after_code_block = {'true' if stop else 'false'}"
        lines.append(line)
    dest.write_text("\n".join(lines) + "\n")
    return dest


def measured(cmd: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, cwd=REPO, env=env)
    lines = proc.stdout.strip().splitlines()
    out = json.loads(lines[-1])
    out["stdout_tail"] = lines[-6:-1]
    out["stderr_tail"] = proc.stderr.strip().splitlines()[-3:]
    if out["rc"] != 0:
        raise SystemExit(f"failed: {cmd}: {out['stderr_tail']}")
    gen = [json.loads(ln[4:]) for ln in lines if ln.startswith("GEN ")]
    if gen:
        out["generation"] = gen[-1]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--g", type=int, default=4)
    ap.add_argument("--skip-eval", action="store_true")
    args = ap.parse_args()
    rows = args.tasks * args.g
    results, figures = {"loadavg_start": list(os.getloadavg())}, {}
    with tempfile.TemporaryDirectory() as tmp:
        evolve = str(Path(sys.executable).with_name("evolve"))
        if not args.skip_eval:
            spec = spec_file(args.tokens, rows, True, Path(tmp) / "eval.toml")
            t0 = time.time()
            results["eval"] = measured([evolve, "eval", "--policy", str(spec), "--suite", "humaneval-chat",
                                        "--split", "heldout", "--tasks", str(args.tasks), "--samples", str(args.g),
                                        "--k", f"1,{args.g}", "--json"])
            results["eval"]["wall_s"] = time.time() - t0
            figures["eval_peak_rss_gb"] = round(results["eval"]["peak_rss_kb"] / 2**20, 2)
        spec = spec_file(args.tokens, rows, False, Path(tmp) / "gen.toml")
        results["generation"] = measured([sys.executable, "-c", GEN, str(spec), str(args.tasks), str(args.g)])
    gen = results["generation"]["generation"]
    figures.update({"generation_peak_rss_gb": round(results["generation"]["peak_rss_kb"] / 2**20, 2),
                    "loop_load_peak_gb": round(gen["load_peak_gb"], 2),
                    "loop_generate_peak_gb": round(gen["generate_peak_gb"], 2),
                    "loop_update_peak_gb": round(gen["update_peak_gb"], 2),
                    "loop_update_tokens": gen["update_tokens"],
                    "generation_rows": gen["rows"], "generation_max_len": gen["max_len"],
                    "generation_tokens_per_s": round(gen["tokens"] / gen["seconds"], 2),
                    "old_path_logits_alone_gb": round(rows * args.tokens * 151936 * 4 / 2**30, 2),
                    "goal_gb": 6})
    write_results("memory", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
