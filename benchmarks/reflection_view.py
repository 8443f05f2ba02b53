"""The reflective dataset's two views on the gym (issue 37 item 4): prompt-only evolution with the offline
reflector and the gym's imperfect teacher as a frozen policy (tests/prompt/test_gain.py's setting: the
loop's own prompt-only path, in-group selection, 10 generations of 24 tasks x 8 samples), once with
``reflection_view = "generation"`` (this generation's routed rollouts) and once with ``"pooled"`` (the
last ``failure_window`` steps' failures, grouped by class), on several gym seeds. Held-out pass@1 of the
seed prompt and of the evolved one, on all held-out tasks x 4 samples with a fixed seed.

The offline reflector reads only the signature groups (tag retrieval), so this measures what pooling
does to the lessons it retrieves; the lines an LM reflector writes from the pooled prompt need the 1.5B
and the headroom probe (not run here).

    PYTHONPATH=. python benchmarks/reflection_view.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(REPO / "tests" / "prompt"))

from results_io import print_figures, write_results  # noqa: E402
from test_gain import SEED, TeacherPolicy, pass_at_1, prompt_only_loop  # noqa: E402

from evolve.gym import load_gym  # noqa: E402
from evolve.prompt import PromptEvolutionConfig  # noqa: E402
from evolve.prompt.lessons import split_lessons  # noqa: E402

VIEWS = ("generation", "pooled")


def one_run(seed: int, view: str, generations: int, verifier) -> dict:
    train, heldout = load_gym("train", seed=seed), load_gym("heldout", seed=seed)
    random.Random(seed).shuffle(train)
    policy = TeacherPolicy(train + heldout)
    t0 = time.perf_counter()
    before = pass_at_1(policy, verifier, SEED, heldout, 4, seed=12345)
    cfg = PromptEvolutionConfig(proposals_per_step=3, max_lessons=3, reflection_view=view)
    ev, _ = prompt_only_loop(policy, verifier, train, heldout[:8], generations=generations, tasks=24, samples=8,
                             prompt=cfg)
    best = ev.current()
    after = pass_at_1(policy, verifier, best, heldout, 4, seed=12345)
    return {"seed": seed, "view": view, "before": round(before, 4), "after": round(after, 4),
            "gain": round(after - before, 4), "lessons": split_lessons(best.components.get("lessons", "")),
            "wall_s": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--generations", type=int, default=10)
    args = ap.parse_args()
    from evolve.verification import Verifier

    runs = []
    with Verifier(jobs=2) as v:
        for seed in args.seeds:
            for view in VIEWS:
                runs.append(one_run(seed, view, args.generations, v))
                print(runs[-1], flush=True)
    gains = {view: [r["gain"] for r in runs if r["view"] == view] for view in VIEWS}
    diffs = [p["gain"] - g["gain"] for g, p in zip(runs[::2], runs[1::2], strict=True)]
    figures = {f"gain_{view}_mean": round(statistics.fmean(gains[view]), 4) for view in VIEWS}
    figures["pooled_minus_generation_mean"] = round(statistics.fmean(diffs), 4)
    figures["pooled_minus_generation_min"] = round(min(diffs), 4)
    figures["pooled_minus_generation_max"] = round(max(diffs), 4)
    figures["seeds"] = len(args.seeds)
    write_results("reflection_view", args=vars(args), results={"runs": runs}, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
