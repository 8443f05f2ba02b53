"""Code agents on the tiny-coder default model: single-turn vs self-repair, GRPO vs GiGPO, guided retries.

Arms (each from the same base weights, trained on the same sequence of train tasks, until the same
budget of POLICY tokens -- tokens the policy generated, environment tokens excluded -- is spent):

- ``single``: the tiny-coder environment, one turn, GRPO;
- ``repair2`` / ``repair3``: tiny-coder-repair with T = 2 / 3 policy turns (visible-test feedback), GRPO;
- ``repair3_gigpo``: tiny-coder-repair T = 3, GiGPO (anchor states = the conversation hash);
- ``single_guided`` (``--guided``): single-turn, plus guided retries (errors + visible diff) for
  all-fail groups, trained as if unguided; its retries' tokens count against the same budget.

Final held-out pass@1 is measured in each arm's own environment (the repair arms get their T turns)
and single-turn for every arm (first attempt, never any guidance). Baselines: the untrained model in
each environment, measured in the same run. Ratios are printed as ``name=value`` lines, raw results
go to benchmarks/results/agents.json.

    nice -n 10 .venv/bin/python benchmarks/agents.py [--budget 24000] [--tasks 8] [--samples 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

from evolve.env.episode import collect, verify  # noqa: E402
from evolve.env.registry import load_environment  # noqa: E402
from evolve.policy import PolicySpec, load_policy  # noqa: E402
from evolve.prompt.seed import load_seed_prompt  # noqa: E402
from evolve.verification import Verifier  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ARMS = {  # name: (environment, max_turns, advantage, guided)
    "single": ("tiny-coder", 1, "grpo", False),
    "repair2": ("tiny-coder-repair", 2, "grpo", False),
    "repair3": ("tiny-coder-repair", 3, "grpo", False),
    "repair3_gigpo": ("tiny-coder-repair", 3, "gigpo", False),
    "single_guided": ("tiny-coder", 1, "grpo", True),
}


def policy_tokens(rollouts) -> int:
    return sum(sum(r.completion_mask) if r.completion_mask else len(r.completion_ids) for r in rollouts)


def by_task(rollouts):
    groups: dict[str, list] = {}
    for r in rollouts:
        groups.setdefault(r.task_id, []).append(r)
    return list(groups.values())


def shared_anchor_share(rollouts) -> float:
    """Share of later policy turns (turn >= 2) whose anchor state another trajectory of the group shares."""
    later = [(r.task_id, t.observation_hash) for r in rollouts
             for t in [t for t in r.turns if t.role == "assistant"][1:] if t.observation_hash]
    counts = Counter(later)
    return sum(counts[k] > 1 for k in later) / len(later) if later else 0.0


def episodes(env, policy, verifier, cand, tasks, n, seed, purpose="heldout"):
    rollouts = collect(env, policy, cand, tasks, n, seed, purpose, "w", verifier)
    verify(verifier, {t.task_id: t for t in tasks}, rollouts, None)
    return rollouts


def evaluate(env, policy, verifier, cand, tasks, n, seed) -> dict:
    rs = episodes(env, policy, verifier, cand, tasks, n, seed)
    return {"pass@1": float(np.mean([r.passed for r in rs])), "policy_tokens_per_episode": policy_tokens(rs) / len(rs),
            "turns_per_episode": float(np.mean([max(1, sum(t.role == "assistant" for t in r.turns)) for r in rs]))}


def train_arm(name, args, base_verifier, cand, heldout, train_tasks) -> dict:
    env_name, turns, advantage, guided = ARMS[name]
    spec = PolicySpec.from_toml(REPO / "policies" / "tiny-coder.toml")
    spec = PolicySpec.from_dict({**spec.model_dump(), "grpo": {**spec.grpo.model_dump(), "advantage": advantage}})
    policy = load_policy(spec)
    env = load_environment(env_name, max_turns=turns)
    verifier = env.wrap_verifier(base_verifier)
    t0, spent, step, log = time.perf_counter(), 0, 0, []
    while spent < args.budget:
        pick = np.random.default_rng([args.seed, step]).choice(len(train_tasks), args.tasks, replace=False)
        tasks = [train_tasks[i] for i in sorted(pick)]
        rollouts = episodes(env, policy, verifier, cand, tasks, args.samples, args.seed * 1000 + step, "train")
        groups, spent = by_task(rollouts), spent + policy_tokens(rollouts)
        row = {"step": step, "policy_tokens": spent, "train_pass": float(np.mean([r.passed for r in rollouts])),
               "shared_anchor_share": shared_anchor_share(rollouts)}
        if guided:
            from evolve.loop.guided_retry import guided_retries

            g = guided_retries(env, policy, verifier, cand, groups, {t.task_id: t for t in tasks},
                               ["errors", "visible_diff"], [], args.samples // 2, args.seed * 1000 + step + 500, "w")
            spent += policy_tokens(g.retries)
            groups = [gr for gr in groups if gr[0].task_id not in {x[0].task_id for x in g.groups}] + g.groups
            row.update(guided_groups=len(g.groups), guided_pass1=g.audit["guided_pass1"], flagged=g.audit["flagged"])
        row.update(policy.update(groups).to_dict())
        row["seconds_total"] = round(time.perf_counter() - t0, 1)
        log.append(row)
        print(name, {k: row[k] for k in ("step", "policy_tokens", "train_pass", "shared_anchor_share",
                                         "n_trained_groups", "seconds_total")}, flush=True)
        step += 1
    train_s = time.perf_counter() - t0
    single = load_environment("tiny-coder")
    own = evaluate(env, policy, verifier, cand, heldout, args.heldout_samples, args.seed + 7)
    first = own if turns == 1 else evaluate(single, policy, base_verifier, cand, heldout, args.heldout_samples,
                                            args.seed + 7)
    out = {"env": env_name, "max_turns": turns, "advantage": advantage, "guided": guided, "steps": step,
           "policy_tokens": spent, "train_seconds": train_s, "heldout": own, "heldout_first_turn": first, "log": log}
    if guided:  # the leakage audit: held-out pass@1 without guidance next to the guided retries' pass rate
        rows = [r for r in log if r.get("guided_groups")]
        out["leakage_audit"] = {"heldout_pass1_unguided": own["pass@1"],
                                "guided_pass1": float(np.mean([r["guided_pass1"] for r in rows])) if rows else None,
                                "flagged": int(sum(r["flagged"] for r in rows)), "guided_groups":
                                int(sum(r["guided_groups"] for r in rows))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=24000, help="policy tokens of training per arm")
    ap.add_argument("--tasks", type=int, default=8, help="train tasks per step")
    ap.add_argument("--samples", type=int, default=8, help="G: episodes per task")
    ap.add_argument("--heldout", type=int, default=40, help="held-out tasks")
    ap.add_argument("--heldout-samples", type=int, default=4)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="agents", help="results file benchmarks/results/<name>.json")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    cand = load_seed_prompt(REPO / "prompts" / "tiny-coder.toml")
    splits = load_environment("tiny-coder").splits()
    order = np.random.default_rng(args.seed).permutation(len(splits["heldout"]))
    heldout = [splits["heldout"][i] for i in order[:args.heldout]]
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    results: dict = {"started_at_commit": commit, "base": {}, "arms": {}}
    with Verifier(None, jobs=1) as verifier:
        base = load_policy(PolicySpec.from_toml(REPO / "policies" / "tiny-coder.toml"))
        for label, (env_name, turns) in {"single": ("tiny-coder", 1), "repair2": ("tiny-coder-repair", 2),
                                         "repair3": ("tiny-coder-repair", 3)}.items():
            env = load_environment(env_name, max_turns=turns)
            results["base"][label] = evaluate(env, base, env.wrap_verifier(verifier), cand, heldout,
                                              args.heldout_samples, args.seed + 7)
            print(label, "base", results["base"][label], flush=True)
        del base
        for name in args.arms.split(","):
            results["arms"][name] = train_arm(name, args, verifier, cand, heldout, splits["train"])
            arm = results["arms"][name]
            print(name, arm["steps"], "steps", arm["heldout"], arm["heldout_first_turn"], flush=True)
    write_results(args.name, args=vars(args), results=results, figures=figures_of(results))
    print_figures(figures_of(results))


def figures_of(results: dict) -> dict:
    base, arms = results["base"], results["arms"]
    fig = {f"base_{k}_pass1": round(v["pass@1"], 4) for k, v in base.items()}
    for name, arm in arms.items():
        fig[f"{name}_pass1"] = round(arm["heldout"]["pass@1"], 4)
        fig[f"{name}_first_turn_pass1"] = round(arm["heldout_first_turn"]["pass@1"], 4)
        fig[f"{name}_policy_tokens"] = arm["policy_tokens"]
        if arm["max_turns"] > 1:  # how often a later turn's anchor state is shared within its group
            fig[f"{name}_shared_anchor_share"] = round(float(np.mean([r["shared_anchor_share"] for r in arm["log"]])), 4)
        if "leakage_audit" in arm:
            fig[f"{name}_guided_pass1"] = arm["leakage_audit"]["guided_pass1"]
            fig[f"{name}_leak_flags"] = arm["leakage_audit"]["flagged"]
    ratio = lambda a, b: round(a / b, 4) if b else float("nan")  # noqa: E731
    p = {k: a["heldout"]["pass@1"] for k, a in arms.items()}
    if "single" in p:
        for other in ("repair2", "repair3", "single_guided"):
            if other in p:
                fig[f"{other}_vs_single_pass1"] = ratio(p[other], p["single"])
        fig["single_vs_base_pass1"] = ratio(p["single"], base["single"]["pass@1"])
    if "repair3" in p and "repair3_gigpo" in p:
        fig["gigpo_vs_grpo_repair3_pass1"] = ratio(p["repair3_gigpo"], p["repair3"])
    return fig


if __name__ == "__main__":
    main()
