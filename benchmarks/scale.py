"""Scale-out on a local Ray cluster: verification and rollout throughput with 1 and 2 actors.

A head and a second node on 127.0.0.1 (num_cpus 1 each, evolve.cluster.local) on this machine's 2
cores, which other jobs share: the ratios (2 actors / 1 actor, and each against the same work done
in this process) are measured within one run, reps interleaved, medians reported; the machine's load
average is recorded. Verification: HumanEval-style gym tasks with their reference solutions and a
wrong answer each, one sandbox job per actor. Rollouts: the CI tiny model, per-task seeded sampling.

    .venv/bin/python benchmarks/scale.py [--pairs 240] [--prompts 16] [--samples 4] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results_io import machine_facts, print_figures, write_results  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def verification(args, reps: int) -> dict:
    from evolve.cluster.verify_pool import RayVerifierPool
    from evolve.gym import load_gym
    from evolve.verification import Verifier

    tasks = load_gym("train", seed=0, n=args.pairs // 2)
    pairs = [p for t in tasks for p in ((t, t.canonical_solution), (t, "def f(*a):\n    return 0\n"))]
    local = Verifier(None, jobs=1)
    pools = {k: RayVerifierPool(None, actors=k, jobs=1, actor_cpus=0.5) for k in (1, 2)}
    try:
        for v in (local, *pools.values()):
            v.verify_batch(pairs[:8])  # warm: sandbox servers up
        secs = {"local": [], "1": [], "2": []}
        for _ in range(reps):  # interleaved, so a load swing hits every arm
            secs["local"].append(timed(lambda: local.verify_batch(pairs)))
            for k, pool in pools.items():
                secs[str(k)].append(timed(lambda pool=pool: pool.verify_batch(pairs)))
    finally:
        local.close()
        for pool in pools.values():
            pool.close()
    return {"items": len(pairs), "seconds": secs,
            "per_s": {k: len(pairs) / statistics.median(v) for k, v in secs.items()}}


def rollouts(args, reps: int) -> dict:
    from evolve.cluster.rollout_pool import RayRolloutBackend
    from evolve.gym import load_gym
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt.candidate import render_messages

    spec = PolicySpec.from_toml(REPO / "policies" / "tiny-coder-ci-task.toml")
    policy = load_policy(spec)
    prompts = [render_messages({"system": "Write f."}, t) for t in load_gym("train", seed=1, n=args.prompts)]
    pools = {k: RayRolloutBackend(spec, policy.base_path, policy.model, actors=k, actor_cpus=0.5) for k in (1, 2)}
    try:
        for b in (policy.backend, *pools.values()):
            b.generate(prompts[:2], 2, 0)  # warm
        secs = {"local": [], "1": [], "2": []}
        for rep in range(reps):
            secs["local"].append(timed(lambda rep=rep: policy.backend.generate(prompts, args.samples, rep)))
            for k, pool in pools.items():
                secs[str(k)].append(timed(lambda pool=pool, rep=rep: pool.generate(prompts, args.samples, rep)))
        sync = timed(lambda: pools[2].sync_weights(policy.model))
    finally:
        for pool in pools.values():
            pool.close()
    n = len(prompts) * args.samples
    return {"items": n, "seconds": secs, "per_s": {k: n / statistics.median(v) for k, v in secs.items()},
            "weight_sync_2_actors_s": sync, "parameters": sum(p.numel() for p in policy.model.parameters())}


def lineage_cost(args) -> dict:
    """Bytes and insert seconds per rollout row in a SQLite lineage: real samples of the CI model on gym
    tasks, verified with full isolation (the on-disk size after VACUUM, indexes included)."""
    import sqlite3

    from evolve.gym import load_gym
    from evolve.lineage import LineageStore
    from evolve.loop.rollouts import roll_out, verify
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt.candidate import Candidate
    from evolve.verification import Verifier

    policy = load_policy(PolicySpec.from_toml(REPO / "policies" / "tiny-coder-ci-task.toml"))
    tasks = load_gym("train", seed=2, n=args.prompts)
    rolls = roll_out(policy, Candidate({"system": "Write f."}), tasks, args.samples, 0, "train", "w")
    with Verifier(None, jobs=1) as v:
        verify(v, {t.task_id: t for t in tasks}, rolls, None)
    folder = Path(tempfile.mkdtemp(prefix="evolve-scale-db-"))
    store = LineageStore.open(f"sqlite:///{folder / 'l.db'}")
    store.create_run("r", {})
    empty = (folder / "l.db").stat().st_size
    gid = store.begin_generation("r", None, {})
    t0 = time.perf_counter()
    for _ in range(10):  # 10 copies: enough rows that page granularity does not dominate
        store.add_rollouts(gid, rolls)
    insert_s = time.perf_counter() - t0
    store.close()
    con = sqlite3.connect(folder / "l.db")
    con.execute("VACUUM")
    con.close()
    n = 10 * len(rolls)
    return {"rollouts": n, "bytes_per_rollout": ((folder / "l.db").stat().st_size - empty) / n,
            "insert_ms_per_rollout": 1000 * insert_s / n,
            "mean_completion_tokens": statistics.mean(len(r.completion_ids) for r in rolls)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=240, help="verdicts per verification batch")
    p.add_argument("--prompts", type=int, default=16, help="tasks per rollout batch")
    p.add_argument("--samples", type=int, default=4, help="samples per task")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)
    from evolve.cluster.local import start
    from evolve.cluster.runtime import connect, disconnect

    load_before = [round(x, 2) for x in os.getloadavg()]
    cluster = start(tempfile.mkdtemp(prefix="evolve-scale-"), nodes=2, cpus=1)
    try:
        connect(cluster.address)
        ver = verification(args, args.reps)
        rol = rollouts(args, args.reps)
    finally:
        disconnect()
        cluster.stop()
    db = lineage_cost(args)
    figures = {
        "verify_2_actors_vs_1": ver["per_s"]["2"] / ver["per_s"]["1"],
        "verify_1_actor_vs_in_process": ver["per_s"]["1"] / ver["per_s"]["local"],
        "verify_2_actors_per_s": ver["per_s"]["2"],
        "rollout_2_actors_vs_1": rol["per_s"]["2"] / rol["per_s"]["1"],
        "rollout_1_actor_vs_in_process": rol["per_s"]["1"] / rol["per_s"]["local"],
        "rollout_2_actors_samples_per_s": rol["per_s"]["2"],
        "weight_sync_s": rol["weight_sync_2_actors_s"],
        "lineage_bytes_per_rollout": db["bytes_per_rollout"],
        "lineage_insert_ms_per_rollout": db["insert_ms_per_rollout"],
    }
    machine = machine_facts(loadavg_before=load_before, note="2 cores shared with other jobs; nodes num_cpus=1 each")
    write_results("scale", args=vars(args), results={"verification": ver, "rollouts": rol, "lineage": db}, figures=figures,
                  machine=machine)
    print_figures(figures)


if __name__ == "__main__":
    main()
