"""Measure prompt-only evolution on the tiny-coder gym with frozen weights.

    python -m evolve.prompt.measure --model runs/models/tiny-coder-<hash> [--steps 6] [--heldout 60]

Held-out pass@1 of the seed prompt and of the evolved prompt, on held-out tasks and a
sampling seed the evolution never sees. Prints a table, then ``name=value`` lines.
"""

from __future__ import annotations

import argparse
import json
import random
import time


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="tiny-coder model folder (evolve bootstrap output)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--heldout", type=int, default=60, help="held-out tasks evaluated")
    ap.add_argument("--samples", type=int, default=8, help="samples per held-out task")
    ap.add_argument("--val", type=int, default=40, help="train tasks used for validation")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)

    import torch

    from evolve.gym import load_gym
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt import (
        MemoryRecorder,
        PromptEvolutionConfig,
        PromptEvolver,
        load_seed_prompt,
        make_reflector,
    )
    from evolve.prompt.adapter import roll_out_candidate
    from evolve.prompt.driver import DriverConfig, evolve_prompt_only
    from evolve.prompt.reflect.offline import resolve_lessons_dir
    from evolve.verification import Verifier

    torch.set_num_threads(1)
    policy = load_policy(PolicySpec.from_dict({"model": a.model, "seed": a.seed, "threads": 1,
                                               "sampling": {"temperature": 1.0, "max_new_tokens": 120}}))
    train, held = load_gym("train", seed=0), load_gym("heldout", seed=0)
    random.Random(a.seed).shuffle(train)
    val, reflect_on = train[: a.val], train[a.val:]
    heldout = random.Random(a.seed + 1).sample(held, min(a.heldout, len(held)))
    seed = load_seed_prompt(resolve_lessons_dir("prompts") / "tiny-coder.toml")
    cfg = PromptEvolutionConfig(proposals_per_step=3)
    rec = MemoryRecorder()
    ev = PromptEvolver(cfg, make_reflector(cfg, rec), seed)
    t0 = time.perf_counter()
    with Verifier(jobs=2) as v:
        def p1(cand) -> float:
            groups = roll_out_candidate(policy, v, cand, heldout, a.samples, 4242 + a.seed, purpose="heldout")
            return sum(r.passed for g in groups for r in g) / sum(len(g) for g in groups)

        before = p1(seed)
        res = evolve_prompt_only(ev, policy, v, reflect_on, val,
                                 DriverConfig(steps=a.steps, tasks_per_step=12, samples_per_task=4,
                                              minibatch_tasks=12, seed=a.seed), say=print)
        after = p1(res.best)
    elapsed = time.perf_counter() - t0
    accepted = [p for s in res.steps for p in s["proposals"] if p["accepted"]]
    print(f"\n| prompt | held-out pass@1 ({len(heldout)} tasks x {a.samples}) | ratio |\n|---|---|---|")
    print(f"| seed | {before:.3f} | 1.00 |")
    print(f"| evolved | {after:.3f} | {after / before if before else float('nan'):.2f} |")
    print("evolved lessons:", json.dumps(res.best.components.get("lessons", "")))
    print(f"proposals={sum(len(s['proposals']) for s in res.steps)} accepted={len(accepted)} "
          f"metric_calls={ev.metric_calls} reflection_calls={len(rec.calls)} seconds={elapsed:.0f}")
    print(f"heldout_pass1_seed={before:.4f}")
    print(f"heldout_pass1_evolved={after:.4f}")
    print(f"heldout_pass1_gain={after - before:.4f}")


if __name__ == "__main__":
    main()
