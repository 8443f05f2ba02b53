"""How far off-policy is a challenger's completion under the incumbent's prompt, on the real model? (issue 38)

``update_prompt = "incumbent"`` (evolve/loop/recontext.py) trains a challenger's completion under the
incumbent's prompt with the importance ratio pi(y | incumbent) / pi(y | challenger), clipped to
[1 - epsilon_low, 1 + epsilon_high]. On the gym's model the clip was active on ~1% of tokens (the two contexts
give nearly the same distribution). This measures the same ratio on Qwen2.5-Coder-0.5B-Instruct (the
policy's spec, HF forward at its temperature, base weights as at a run's first update) for completions the
headroom probe sampled under each stage-2 line (runs/headroom/0.5b, stage 1's draw 0), against the seed prompt.

Completion token ids are the recorded text re-tokenised (the records keep text, not ids); the end-of-turn
token is not in the text, so it is not scored.

    .venv/bin/python benchmarks/recontext_ratio.py [--tasks 24]   # -> benchmarks/results/recontext_ratio.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import headroom  # noqa: E402
from headroom_stage2 import frozen_names  # noqa: E402
from results_io import machine_facts, print_figures, write_results  # noqa: E402


def context_logprobs(policy, prompts: list[list[int]], completions: list[list[int]], batch: int = 4) -> list:
    import torch

    from evolve.policy.updater import _Row, collate, completion_logprobs

    out = []
    for i in range(0, len(prompts), batch):
        rows = [_Row(p, c, [], 0.0) for p, c in zip(prompts[i:i + batch], completions[i:i + batch], strict=True)]
        x = collate(rows, policy.tokenizer.pad_token_id)
        with torch.no_grad():
            lp = completion_logprobs(policy.model, *x, temperature=policy.spec.sampling.temperature)
        out += [lp[j, :len(r.completion_ids)].float() for j, r in enumerate(rows)]
    return out


def measure(policy, name: str, components: dict, seed_components: dict, tasks: list, records: dict,
            eps: tuple[float, float]) -> dict:
    from evolve.env.render import render_messages
    from evolve.policy.chat import render_prompt

    tok = policy.tokenizer
    used = [t for t in tasks if (t.task_id, 0) in records]
    ids = lambda comps, t: tok(render_prompt(tok, render_messages(comps, t)), add_special_tokens=False)["input_ids"]  # noqa: E731
    comps = [tok(records[(t.task_id, 0)]["text"], add_special_tokens=False)["input_ids"] for t in used]
    keep = [i for i, c in enumerate(comps) if c]
    used, comps = [used[i] for i in keep], [comps[i] for i in keep]
    sampled = context_logprobs(policy, [ids(components, t) for t in used], comps)
    incumbent = context_logprobs(policy, [ids(seed_components, t) for t in used], comps)
    logr = [b - a for a, b in zip(sampled, incumbent, strict=True)]
    flat = [float(x) for r in logr for x in r]
    lo, hi = math.log(1 - eps[0]), math.log(1 + eps[1])
    outside = sum(x < lo or x > hi for x in flat)
    seq = sorted(float(r.sum()) for r in logr)
    return {"name": name, "completions": len(logr), "tokens": len(flat),
            "mean_abs_log_ratio": round(sum(abs(x) for x in flat) / len(flat), 4),
            "tokens_outside_clip": round(outside / len(flat), 4),
            "completions_with_a_token_outside": round(sum(any(x < lo or x > hi for x in r.tolist()) for r in logr)
                                                      / len(logr), 3),
            "median_sequence_log_ratio": round(seq[len(seq) // 2], 3)}


def main() -> None:
    from evolve.policy import PolicySpec, load_policy

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=24, help="training problems a line (draw 0 of each)")
    args = ap.parse_args()
    out_dir = headroom.REPO / "runs" / "headroom" / "0.5b"
    cands = {c["name"]: c for c in json.loads((out_dir / "candidates.json").read_text())}
    raw = tomllib.loads((headroom.REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml").read_text())
    policy = load_policy(PolicySpec.model_validate(raw))
    g = policy.spec.grpo
    tasks = headroom.HUMANEVAL.load_train()[:args.tasks]
    seed = tomllib.loads(headroom.SEED_PROMPT.read_text())["components"]
    rows = []
    for name in frozen_names(5):
        records = {(r["task_id"], r["sample"]): r for r in headroom.read_records(out_dir, name)}
        rows.append(measure(policy, name, cands[name]["components"], seed, tasks, records,
                            (g.epsilon_low, g.epsilon_high)))
        print(rows[-1], flush=True)
    figures = {"lines": len(rows), "completions": sum(r["completions"] for r in rows),
               "tokens_outside_clip_mean": round(sum(r["tokens_outside_clip"] for r in rows) / len(rows), 4),
               "tokens_outside_clip_max": max(r["tokens_outside_clip"] for r in rows),
               "mean_abs_log_ratio_mean": round(sum(r["mean_abs_log_ratio"] for r in rows) / len(rows), 4)}
    write_results("recontext_ratio", args={"tasks": args.tasks, "draw": 0, "dtype": str(policy.model.dtype)},
                  results={"lines": rows, "clip": [g.epsilon_low, g.epsilon_high]}, figures=figures,
                  machine=machine_facts())
    print_figures(figures)


if __name__ == "__main__":
    main()
