"""Ablation on the tiny-coder gym: coupled vs weights-only vs prompt-only vs random-reward.

Every arm gets the same learning-rollout budget (train + candidate-evaluation rollouts;
held-out measurement is not counted) and runs with 3 seeds. Prints a table of final
held-out pass@1 (mean ± sd), the rollouts each arm needed to reach weights-only's final
score, and the loop's bookkeeping overhead (lineage commits and state artifacts as a
share of wall time). Headline figures come last as name=value lines.

    .venv/bin/python benchmarks/ablation.py [--config configs/ablation.toml] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = {  # name -> (mode, reward)
    "coupled": ("coupled", "verifier"),
    "weights-only": ("weights", "verifier"),
    "prompt-only": ("prompt", "verifier"),
    "random-reward": ("coupled", "random"),
}


def run_arm(db: Path, config: str, arm: str, seed: int, generations: int) -> tuple[list[dict], float]:
    mode, reward = ARMS[arm]
    name = f"{arm}-s{seed}"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evolve", "run", "--config", config, "--mode", mode, "--reward", reward,
                    "--seed", str(seed), "--generations", str(generations), "--name", name,
                    "--db", f"sqlite:///{db}"], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    out = subprocess.run([sys.executable, "-m", "evolve", "lineage", name, "--json", "--db", f"sqlite:///{db}"],
                         cwd=REPO, check=True, capture_output=True, text=True)
    gens = sorted((g for g in json.loads(out.stdout) if g["status"] == "committed"), key=lambda g: g["index"])
    return gens, wall


def curve(gens: list[dict]) -> list[tuple[int, float]]:
    return [(g["metrics"].get("rollouts_spent", 0), g["metrics"]["heldout"]["pass@1"]) for g in gens]


def rollouts_to_reach(points: list[tuple[int, float]], target: float) -> int | None:
    for spent, score in points:
        if score >= target - 1e-9:
            return spent
    return None


def overhead(gens: list[dict], wall: float) -> float:
    book = sum((g["metrics"].get("timings") or {}).get("commit", 0.0) for g in gens)
    return book / wall if wall else 0.0


def fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(REPO / "configs" / "ablation.toml"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--generations", type=int, default=50, help="upper bound; the rollout budget stops runs")
    ap.add_argument("--arms", default=",".join(ARMS))
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = args.arms.split(",")
    results: dict[str, list[tuple[list[dict], float]]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory(prefix="evolve-ablation-") as tmp:
        db = Path(tmp) / "lineage.db"
        for seed in seeds:
            for arm in arms:
                gens, wall = run_arm(db, args.config, arm, seed, args.generations)
                results[arm].append((gens, wall))
                print(f"# {arm} seed {seed}: {len(gens) - 1} generations, final pass@1 "
                      f"{gens[-1]['metrics']['heldout']['pass@1']:.3f}, {wall:.0f}s", flush=True)

    finals = {a: [g[-1]["metrics"]["heldout"]["pass@1"] for g, _ in runs] for a, runs in results.items()}
    initial = [g[0]["metrics"]["heldout"]["pass@1"] for runs in results.values() for g, _ in runs]
    target = statistics.mean(finals["weights-only"]) if "weights-only" in finals else None
    print()
    print(f"{'arm':<15} {'held-out pass@1':>17} {'Δ vs gen 0':>11} {'rollouts to w-only final':>25} "
          f"{'gens':>5} {'overhead':>9}")
    reach: dict[str, list[int | None]] = {}
    for arm, runs in results.items():
        reach[arm] = [rollouts_to_reach(curve(g), target) if target is not None else None for g, _ in runs]
        got = [r for r in reach[arm] if r is not None]
        reach_s = f"{statistics.mean(got):.0f} ({len(got)}/{len(runs)} reached)" if got else "never"
        gain = statistics.mean(finals[arm]) - statistics.mean(initial)
        print(f"{arm:<15} {fmt(finals[arm]):>17} {gain:>+11.3f} {reach_s:>25} "
              f"{statistics.mean(len(g) - 1 for g, _ in runs):>5.1f} "
              f"{statistics.mean(overhead(g, w) for g, w in runs):>8.1%}")
    print()
    singles = [statistics.mean(finals[a]) for a in ("weights-only", "prompt-only") if a in finals]
    print(f"initial_pass_at_1={statistics.mean(initial):.4f}")
    for arm in results:
        print(f"{arm.replace('-', '_')}_pass_at_1={statistics.mean(finals[arm]):.4f}")
    if "coupled" in finals and len(singles) == 2:  # only meaningful against both single levers
        print(f"coupled_minus_best_single_points={100 * (statistics.mean(finals['coupled']) - max(singles)):.2f}")
    if "coupled" in finals:
        w_budget = [g[-1]["metrics"].get("rollouts_spent", 0) for g, _ in results.get("weights-only", [])]
        got = [r for r in reach["coupled"] if r is not None]
        if got and w_budget:
            print(f"coupled_rollouts_fraction_to_weights_final={statistics.mean(got) / statistics.mean(w_budget):.3f}")
        else:
            print("coupled_rollouts_fraction_to_weights_final=never")
    all_runs = [r for runs in results.values() for r in runs]
    print(f"bookkeeping_overhead={statistics.mean(overhead(g, w) for g, w in all_runs):.4f}")


if __name__ == "__main__":
    main()
