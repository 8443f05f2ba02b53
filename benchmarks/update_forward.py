"""The update's shared-prompt forward against every row's own, on Qwen2.5-Coder-0.5B (issue 36).

One real ``policy.update`` (forward, backward, optimizer step) per arm on the loop's shape of a coupled
generation once a challenger is in the pool: ``--tasks`` humaneval-chat training tasks x 8 rows, 4 under the
seed prompt and 4 under the seed plus a hand line (two prompt arms a task). The completions are the 0.5B's
own replies to those tasks, recorded by the headroom probe (headroom_humaneval_samples.jsonl.gz), so prompt
and completion lengths are the loop's. Rewards alternate 1/0 so every group trains.

Arms, in the order per-row, shared, shared, per-row (``--reps 2``), in one process so their ratio shares
the machine's load: seconds an update, tokens the model was given, model FLOP/s (LoRA: 4 N a token given,
N = 494M as generate.py counts it) as a share of the matmul peak of the dtype in use (measured before and
after), and the largest log-prob difference between the two forwards under the completion mask (the
policy's own dtype: bf16 where the CPU has bf16 kernels).

    nice -n 10 .venv/bin/python benchmarks/update_forward.py [--tasks 4] [--reps 2]

Writes benchmarks/results/update_forward.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402

BASE_PARAMS = 494_032_768  # Qwen2.5-0.5B's parameters, tied head counted once (generate.py)
SAMPLES = REPO / "benchmarks" / "results" / "headroom_humaneval_samples.jsonl.gz"


def replies_by_task() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with gzip.open(SAMPLES, "rt") as f:
        for line in f:
            r = json.loads(line)
            out.setdefault(r["task_id"], []).append(r["text"])
    return out


def build_groups(tok, tasks: list, n_tasks: int):
    """``n_tasks`` groups of 8 rows: 4 under the seed prompt, 4 under the seed plus a hand line."""
    import tomllib

    from headroom import HAND_LINES, SEED_PROMPT

    from evolve.env.render import render_messages
    from evolve.policy.chat import render_prompt
    from evolve.rollout import Rollout

    seed = tomllib.loads(SEED_PROMPT.read_text())["components"]
    arms = [seed, {**seed, "lessons": dict(HAND_LINES)["typemismatch"]}]
    replies = replies_by_task()
    groups = []
    for g, task in enumerate(tasks[:n_tasks]):
        rows = []
        for a, components in enumerate(arms):
            text = render_prompt(tok, render_messages(components, task))
            ids = tok(text, add_special_tokens=False)["input_ids"]
            for k in range(4):
                reply = replies[task.task_id][(4 * a + k) % len(replies[task.task_id])]
                comp = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
                rows.append(Rollout(task_id=task.task_id, group=g, sample_index=len(rows), prompt_version=f"arm{a}",
                                    weights_version="w", messages=[], prompt_text=text, completion=reply,
                                    reward=float(len(rows) % 2), prompt_ids=ids, completion_ids=comp))
        groups.append(rows)
    return groups


def logprob_gaps(policy, groups) -> dict:
    """|log-prob differences| on the same weights under the completion mask: shared-prompt against per-row,
    and, for scale, per-row at micro-batch 1 against the spec's (the same forward, other batch neighbours)."""
    import torch

    from evolve.policy.prompt_sharing import PER_ROW, SHARED_PROMPT

    up = policy.updater
    prep = up.prepare(groups)

    def flat(logps, p) -> torch.Tensor:
        rows = []
        for lp, t in zip(logps, p.tensors, strict=True):
            rows += [lp[i][t[3][i].bool()].float() for i in range(lp.shape[0])]
        return torch.cat(rows)

    got = {}
    for forward in (PER_ROW, SHARED_PROMPT):
        up.forward = forward
        got[forward] = flat(up._all_logprobs(policy.model, prep), prep)
    from evolve.policy.updater import Updater

    spec1 = up.spec.model_copy(update={"grpo": up.spec.grpo.model_copy(update={"micro_batch_size": 1})})
    one = Updater(policy.model, spec1, up.pad_id)
    one.forward = PER_ROW
    single = one.prepare(groups)
    got["per_row_mb1"] = flat(one._all_logprobs(policy.model, single), single)
    shared = (got[SHARED_PROMPT] - got[PER_ROW]).abs()
    batch = (got["per_row_mb1"] - got[PER_ROW]).abs()
    return {"shared_vs_per_row_max": round(float(shared.max()), 5), "shared_vs_per_row_mean": round(float(shared.mean()), 6),
            "per_row_mb1_vs_mb_max": round(float(batch.max()), 5), "per_row_mb1_vs_mb_mean": round(float(batch.mean()), 6),
            "completion_tokens_compared": int(shared.numel())}


def gaps_only(args) -> None:
    from headroom import load_train_tasks
    from results_io import RESULTS_DIR

    from evolve.policy import PolicySpec, load_policy

    doc = json.loads((RESULTS_DIR / "update_forward.json").read_text())
    policy = load_policy(PolicySpec.from_toml(REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml"))
    gaps = logprob_gaps(policy, build_groups(policy.tokenizer, load_train_tasks(), doc["args"]["tasks"]))
    figures = {**doc["figures"], "max_logprob_gap": gaps["shared_vs_per_row_max"],
               "mean_logprob_gap": gaps["shared_vs_per_row_mean"], "batch_max_logprob_gap": gaps["per_row_mb1_vs_mb_max"],
               "batch_mean_logprob_gap": gaps["per_row_mb1_vs_mb_mean"]}
    results = {**doc["results"], "gaps": gaps,
               "gaps_measured": {"machine": machine_facts(), "by": "--gaps-only", "timed_at_commit": doc["commit"]}}
    write_results("update_forward", args=doc["args"], figures=figures, results=results, machine=doc["machine"])
    print_figures(figures)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2, help="1: per-row, shared; 2: per-row, shared, shared, per-row")
    ap.add_argument("--gaps-only", action="store_true",
                    help="only the log-prob gaps, added to the results file a timed run wrote (no update timed)")
    args = ap.parse_args()
    if args.gaps_only:
        gaps_only(args)
        return

    from generate import matmul_peak
    from headroom import load_train_tasks

    from evolve.policy import PolicySpec, load_policy
    from evolve.policy.prompt_sharing import PER_ROW, SHARED_PROMPT, prompt_units

    spec = PolicySpec.from_toml(REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml")
    policy = load_policy(spec)
    dtype = policy.resolved["dtype"]
    groups = build_groups(policy.tokenizer, load_train_tasks(), args.tasks)
    peak_start = matmul_peak(spec.threads, dtype)

    counted = {"tokens": 0}
    policy.model.get_input_embeddings().register_forward_hook(
        lambda m, i, o: counted.__setitem__("tokens", counted["tokens"] + i[0].numel()))
    order = [PER_ROW, SHARED_PROMPT] if args.reps == 1 else [PER_ROW, SHARED_PROMPT, SHARED_PROMPT, PER_ROW]
    runs = []
    for forward in order:
        policy.updater.forward = forward
        counted["tokens"] = 0
        t0 = time.perf_counter()
        stats = policy.update(groups)
        seconds = time.perf_counter() - t0
        runs.append({"forward": forward, "seconds": round(seconds, 2), "tokens_given": counted["tokens"],
                     "loss": stats.loss, "grad_norm": stats.grad_norm, "n_tokens_trained": stats.n_tokens})
        print(f"{forward:14s} {seconds:7.1f} s  {counted['tokens']:6d} tokens  grad_norm {stats.grad_norm:.4g}",
              flush=True)
        write_results("update_forward", args=vars(args), figures={}, results={"runs": runs})  # kept if killed
    peak_end = matmul_peak(spec.threads, dtype)

    gap = logprob_gaps(policy, groups)["shared_vs_per_row_max"]
    prep = policy.updater.prepare(groups)
    prompts = prep.prompts
    units = prompt_units(prompts)
    mean = {f: sum(r["seconds"] for r in runs if r["forward"] == f) / order.count(f) for f in (PER_ROW, SHARED_PROMPT)}
    tokens = {f: next(r["tokens_given"] for r in runs if r["forward"] == f) for f in (PER_ROW, SHARED_PROMPT)}
    peak = max(peak_start, peak_end)
    share = {f: 4 * BASE_PARAMS * tokens[f] / mean[f] / peak for f in mean}
    figures = {
        "cpu": machine_facts()["cpu"], "dtype": dtype, "rows": len(prompts), "distinct_prompts": len(set(units)),
        "prompt_share_of_per_row_tokens": round(sum(len(p) for p in prompts) / tokens[PER_ROW], 3),
        "per_row_update_s": round(mean[PER_ROW], 1), "shared_update_s": round(mean[SHARED_PROMPT], 1),
        "shared_speedup": round(mean[PER_ROW] / mean[SHARED_PROMPT], 3),
        "tokens_given_ratio": round(tokens[SHARED_PROMPT] / tokens[PER_ROW], 3),
        "matmul_peak_tflops": round(peak_start / 1e12, 3), "matmul_peak_tflops_end": round(peak_end / 1e12, 3),
        "per_row_share_of_peak": round(share[PER_ROW], 3), "shared_share_of_peak": round(share[SHARED_PROMPT], 3),
        "max_logprob_gap": round(gap, 5),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
    }
    write_results("update_forward", args=vars(args), figures=figures,
                  results={"runs": runs, "micro_batch_size": spec.grpo.micro_batch_size,
                           "prompt_lengths": sorted({len(p) for p in prompts}),
                           "completion_tokens": prep.n_tokens})
    print_figures(figures)


if __name__ == "__main__":
    main()
