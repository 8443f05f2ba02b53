"""A minimal weights-only GRPO session on the tiny-coder gym, driven through the public policy API.

Used by test_grpo_session.py (short, CI model) and runnable by hand for longer runs:

    .venv/bin/python tests/policy/grpo_session.py --policy policies/tiny-coder.toml --minutes 5

It measures held-out pass@1 before and after. (The real loop, with lineage, is `evolve run --mode weights`.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def grpo_session(policy, train, heldout, components, verifier, *, steps: int | None = None,
                 seconds: float | None = None, tasks_per_step: int = 8, eval_samples: int = 8, seed: int = 0,
                 log=print) -> dict:
    from evolve.policy.evaluate import evaluate_pass_at_k
    from evolve.prompt.candidate import render_messages
    from evolve.rollout import Rollout

    def heldout_pass1() -> float:
        rep = evaluate_pass_at_k(policy, heldout, components, eval_samples, [1], verifier, seed=10_000)
        return rep["overall"]["pass@1"]

    before = heldout_pass1()
    log(f"held-out pass@1 before: {before:.3f}")
    rng = np.random.default_rng(seed)
    t0, step, history = time.perf_counter(), 0, []
    while (steps is None or step < steps) and (seconds is None or time.perf_counter() - t0 < seconds):
        batch = [train[i] for i in rng.choice(len(train), tasks_per_step, replace=False)]
        messages = [render_messages(components, t) for t in batch]
        samples = policy.generate(messages, n=8, seed=seed * 1_000_003 + step)  # G = 8 (was the spec's sampling.n)
        flat = [(t, s) for t, grp in zip(batch, samples, strict=True) for s in grp]
        results = verifier.verify_batch([(t, s.text) for t, s in flat])
        it = iter(results)
        groups = []
        for g, (t, grp) in enumerate(zip(batch, samples, strict=True)):
            groups.append([Rollout(task_id=t.task_id, group=g, sample_index=j, prompt_version="p",
                                   weights_version="w", messages=messages[g], prompt_text=s.prompt_text,
                                   completion=s.text, reward=float((res := next(it)).reward), result=res,
                                   prompt_ids=s.prompt_ids, completion_ids=s.completion_ids, logprobs=s.logprobs)
                           for j, s in enumerate(grp)])
        stats = policy.update(groups)
        train_pass = float(np.mean([r.passed for r in results]))
        history.append({"step": step, "train_pass": train_pass, **stats.to_dict()})
        log(f"step {step}: train pass {train_pass:.3f} zero-var {stats.zero_variance_fraction:.2f} "
            f"loss {stats.loss:+.4f} grad {stats.grad_norm:.3f} ({stats.seconds:.2f}s update)")
        step += 1
    after = heldout_pass1()
    log(f"held-out pass@1 after {step} steps ({time.perf_counter() - t0:.0f}s): {after:.3f}")
    return {"before": before, "after": after, "steps": step, "history": history}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="policies/tiny-coder.toml")
    ap.add_argument("--model", default=None, help="override the spec's model (a local folder)")
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--heldout", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=None)
    args = ap.parse_args()
    from evolve.gym import load_gym
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt.seed import load_seed_prompt
    from evolve.verification import Verifier

    spec = PolicySpec.from_toml(args.policy)
    over = {}
    if args.model:
        over["model"] = args.model
    if args.lr:
        over["optimizer"] = {**spec.optimizer.model_dump(), "lr": args.lr}
    spec = spec.model_copy(update=over) if not over else PolicySpec.from_dict({**spec.model_dump(), **over})
    policy = load_policy(spec)
    components = dict(load_seed_prompt("prompts/tiny-coder.toml").components)
    train, heldout = load_gym("train", seed=0), load_gym("heldout", seed=0, n=args.heldout)
    with Verifier(None, jobs=2) as v:
        out = grpo_session(policy, train, heldout, components, v, seconds=args.minutes * 60, seed=args.seed)
    print(json.dumps({k: out[k] for k in ("before", "after", "steps")}))


if __name__ == "__main__":
    main()
