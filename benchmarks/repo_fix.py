"""repo-fix held-out episodes with a real model: base solve rate without and with guidance.

Unguided: every held-out task (held-out PACKAGES, never trained on) gets ``--samples`` episodes of
at most ``--turns`` tool calls. Guided (Agent-RLVR style): each task whose episodes all failed is
retried with guidance built from the failed episodes' verdicts (``errors``: the failing test
output; ``location``: file and function of the fault, never the fix), and the leakage audit checks
every guidance text for the injected diff's pristine lines. Tokens = policy tokens only.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/repo_fix.py [--turns 3] [--samples 1]
    flock /tmp/evolve-bigmodel.lock env PYTHONPATH=$PWD .venv/bin/python benchmarks/repo_fix.py \
        --policy policies/qwen2.5-coder-0.5b-instruct.toml --max-tasks 4 --samples 2 --turns 4 \
        --max-new-tokens 256 --name repo_fix_qwen05b

Tasks are picked round-robin over the held-out packages. The results file is written once after the
unguided episodes (``"partial": true``) and again when the guided retries are done, so a run stopped
half-way still leaves its measured half, labelled as such.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

from evolve.env.episode import run_episodes  # noqa: E402
from evolve.env.registry import load_environment  # noqa: E402
from evolve.loop.guided import build_guidance, leakage_audit  # noqa: E402
from evolve.loop.guided_retry import _GuidedEnv  # noqa: E402
from evolve.policy import PolicySpec, load_policy  # noqa: E402
from evolve.prompt.seed import load_seed_prompt  # noqa: E402


@dataclass
class Prompt:
    components: dict
    id: str = "repo-fix-seed"


def _stats(groups, seconds: float) -> dict:
    rolls = [r for g in groups for r in g]
    policy_tokens = sum(sum(r.completion_mask) if r.completion_mask else len(r.completion_ids) for r in rolls)
    turns = Counter(sum(t.role == "assistant" for t in r.turns) or 1 for r in rolls)
    return {"episodes": len(rolls), "solved": sum(r.passed for r in rolls),
            "solve_rate": sum(r.passed for r in rolls) / max(1, len(rolls)),
            "policy_tokens_per_episode": policy_tokens / max(1, len(rolls)),
            "seconds_per_episode": seconds / max(1, len(rolls)), "turns": dict(sorted(turns.items())),
            "tools": dict(Counter(_tool(t.content) for r in rolls for t in r.turns if t.role == "assistant")),
            "load_after": [round(x, 2) for x in os.getloadavg()]}


def _tool(text: str) -> str:
    from evolve.repo.tools import ToolError, parse_call

    try:
        return parse_call(text).tool
    except ToolError:
        return "invalid"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="policies/smollm2-135m-instruct.toml")
    ap.add_argument("--tasks-file", default="runs/repo-tasks/tasks.jsonl")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--max-tasks", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="repo_fix", help="results file name (benchmarks/results/NAME.json)")
    ap.add_argument("--prompt", default="prompts/repo-fix.toml", help="seed prompt (its system message)")
    ap.add_argument("--max-new-tokens", type=int, default=0, help="override the policy's (0: keep it)")
    args = ap.parse_args()
    env = load_environment("repo-fix", max_turns=args.turns, repo_tasks=args.tasks_file)
    tasks = _pick(env.splits()["heldout"], args.max_tasks)
    verifier = env.wrap_verifier(None)
    spec = PolicySpec.from_toml(args.policy)
    if args.max_new_tokens:
        spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"max_new_tokens": args.max_new_tokens})})
    t_load = time.monotonic()
    policy = load_policy(spec)
    load_s = time.monotonic() - t_load
    cand = Prompt(dict(load_seed_prompt(args.prompt).components))
    load0 = [round(x, 2) for x in os.getloadavg()]
    t0 = time.monotonic()
    groups = run_episodes(env, policy, verifier, cand, tasks, args.samples, args.seed, purpose="heldout")
    base = _stats(groups, time.monotonic() - t0)
    _write(args, tasks, groups, base, None, None, {}, load0, load_s)
    failed = [g for g in groups if not any(r.passed for r in g)]
    guidance = {g[0].task_id: build_guidance(["errors", "location"], g) for g in failed}
    by_id = {t.task_id: t for t in tasks}
    retry_tasks = [by_id[tid] for tid, gd in guidance.items() if gd.text]
    t1 = time.monotonic()
    guided_groups = run_episodes(_GuidedEnv(env, guidance), policy, verifier, cand, retry_tasks, args.samples,
                                 args.seed + 1, purpose="guided") if retry_tasks else []
    guided = _stats(guided_groups, time.monotonic() - t1)
    audit = leakage_audit([(by_id[tid], gd.text) for tid, gd in guidance.items() if gd.text],
                          heldout_pass1_unguided=base["solve_rate"], guided_pass1=guided["solve_rate"])
    policy.close()
    _write(args, tasks, groups, base, guided, audit, guidance, load0, load_s)


def _pick(heldout: list, n: int) -> list:
    """Round-robin over the held-out packages, in file order within each."""
    by_pkg: dict[str, list] = {}
    for t in heldout:
        by_pkg.setdefault(t.meta["package"], []).append(t)
    out = []
    while len(out) < n and any(by_pkg.values()):
        for queue in by_pkg.values():
            if queue and len(out) < n:
                out.append(queue.pop(0))
    return out


def _write(args, tasks, groups, base, guided, audit, guidance, load0, load_s) -> None:
    partial = guided is None
    transcripts = [{"task": r.task_id, "passed": r.passed, "turns": [(t.role, t.content[:400], t.reward)
                                                                       for t in r.turns]}
                   for g in groups[:3] for r in g]
    results = {"partial": partial, "unguided": base, "guided": guided, "audit": audit,
               "tasks": [t.task_id for t in tasks], "policy_load_s": round(load_s, 1),
               "guidance_example": next((gd.text for gd in guidance.values() if gd.text), ""),
               "transcripts": transcripts, "loadavg_start": load0}
    figures = {"repo_fix_heldout_tasks": len(tasks), "repo_fix_episodes": base["episodes"],
               "repo_fix_solve_rate_unguided": base["solve_rate"],
               "repo_fix_policy_tokens_per_episode": round(base["policy_tokens_per_episode"], 1),
               "repo_fix_seconds_per_episode": round(base["seconds_per_episode"], 1),
               "repo_fix_valid_tool_calls": sum(v for k, v in base["tools"].items() if k != "invalid"),
               "repo_fix_tool_calls": sum(base["tools"].values())}
    if not partial:
        figures |= {"repo_fix_solve_rate_guided": guided["solve_rate"], "repo_fix_guided_episodes": guided["episodes"],
                    "repo_fix_guided_seconds_per_episode": round(guided["seconds_per_episode"], 1),
                    "repo_fix_guidance_leaks": audit["flagged"]}
    figures["loadavg_1m"] = load0[0]
    write_results(args.name, args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
