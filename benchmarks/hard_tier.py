"""The gym's hard tier on the base model: how often a group fails entirely, and what a lesson does.

Samples ``--samples`` completions per task for a seeded subset of the hard tier's train tasks
(half CMP-bug tasks, half the usual mix; see evolve/gym/tiers.py), under the seed prompt and
under the seed prompt plus the lesson the offline reflector can retrieve from boundary failures.
Reports, per prompt: pass@1, pass@8 (unbiased, from ``--samples`` >= 8), the share of tasks with
pass@8 <= 0.1, and the share of all-fail groups of 8 (the first 8 samples).

    .venv/bin/python benchmarks/hard_tier.py [--tasks 64] [--samples 16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

from evolve.gym import load_gym, load_tier  # noqa: E402
from evolve.gym.notes import CMP, NOTES  # noqa: E402
from evolve.policy import PolicySpec, load_policy  # noqa: E402
from evolve.policy.evaluate import evaluate_pass_at_k  # noqa: E402
from evolve.verification import Verifier  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def measure(policy, tasks, components, samples, verifier, seed) -> dict:
    res = evaluate_pass_at_k(policy, tasks, components, samples, [1, 8], verifier, seed=seed)
    rows = res["tasks"]
    hard_ids = {t.task_id for t in tasks if CMP in t.meta["bug_modes"]}
    low = [tid for tid, r in rows.items() if r["pass@8"] <= 0.1]
    return {"pass@1": res["overall"]["pass@1"], "pass@8": res["overall"]["pass@8"],
            "share_pass8_le_0.1": len(low) / len(rows),
            "share_pass8_le_0.1_cmp": sum(t in hard_ids for t in low) / max(1, len(hard_ids)),
            "pass@1_cmp": sum(rows[t]["pass@1"] for t in hard_ids) / max(1, len(hard_ids)),
            "tasks": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    spec = PolicySpec.from_toml(REPO / "policies" / "tiny-coder.toml")
    policy = load_policy(spec)
    train = load_tier("hard", load_gym("train"))
    import numpy as np

    pick = sorted(np.random.default_rng(args.seed).permutation(len(train))[:args.tasks].tolist())
    tasks = [train[i] for i in pick]
    seed_prompt = {"system": "Write a Python function that solves the task.", "lessons": ""}
    lesson = {**seed_prompt, "lessons": NOTES[CMP]}
    with Verifier(None, jobs=1) as verifier:
        base = measure(policy, tasks, seed_prompt, args.samples, verifier, args.seed)
        with_lesson = measure(policy, tasks, lesson, args.samples, verifier, args.seed)
    figures = {
        "hard_tier_share_cmp": round(sum(CMP in t.meta["bug_modes"] for t in train) / len(train), 3),
        "base_pass_at_1": round(base["pass@1"], 4), "base_pass_at_8": round(base["pass@8"], 4),
        "base_share_tasks_pass8_le_0.1": round(base["share_pass8_le_0.1"], 3),
        "base_pass_at_1_cmp_tasks": round(base["pass@1_cmp"], 4),
        "lesson_pass_at_1": round(with_lesson["pass@1"], 4),
        "lesson_pass_at_1_cmp_tasks": round(with_lesson["pass@1_cmp"], 4),
        "lesson_share_tasks_pass8_le_0.1": round(with_lesson["share_pass8_le_0.1"], 3),
        "lesson_gain_points": round(100 * (with_lesson["pass@1"] - base["pass@1"]), 2),
    }
    write_results("hard_tier", args=vars(args), results={"base": base, "lesson": with_lesson,
                                                        "lesson_text": NOTES[CMP]}, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
