"""How fast `evolve lineage` is on a 10,000-generation run (target: under 1 s, interpreter start included).

Builds a branching lineage (forks, reflection and merge prompt versions, one weights version per
generation, metrics) in a temp SQLite file with bulk inserts, then times the real `evolve` entry
point in a subprocess against baselines measured in the same run: a bare interpreter start, a raw
`SELECT * FROM generation` through sqlite3 in a subprocess, and `evolve runs` (CLI + SQLAlchemy start
with a trivial query). Also times a Rich ``Tree`` of the same data, which the CLI does not use.

    .venv/bin/python benchmarks/lineage_scale.py [--generations 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert

from evolve.lineage import Generation, LineageStore, PromptParent, PromptVersion, WeightsVersion
from evolve.util.hashing import content_hash

PY = sys.executable
EVOLVE = str(Path(PY).with_name("evolve"))


def build(db: Path, n: int, seed: int = 0) -> str:
    """A run of ``n`` generations: mostly chains, a fork every ~50, a new prompt every ~10, merges."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    store = LineageStore.open(str(db))
    run = store.create_run("big", {"generations": n})
    pvs, pv_rows, edges = [], [], []
    wv_rows, gens = [], []
    w_of: dict[int, str] = {}
    pv_of: dict[int, str] = {}
    for i in range(n):
        parent = None if i == 0 else (rng.randrange(i) if rng.random() < 0.02 else i - 1)
        pv = pv_of.get(parent)
        if pv is None or rng.random() < 0.1:
            comps = {"system": "Write Python.", "lessons": f"- lesson {i}"}
            new = content_hash({"components": comps})
            how = "seed" if pv is None else "reflection"
            parents = [] if pv is None else [pv]
            if pv is not None and len(pvs) > 3 and rng.random() < 0.2:
                parents.append(rng.choice(pvs[:-1]))
                how = "merge"
            pv_rows.append({"id": new, "components": comps, "proposed_by": how, "meta": {}, "created_at": now})
            edges += [{"child": new, "parent": p, "position": k} for k, p in enumerate(dict.fromkeys(parents))]
            pvs.append(new)
            pv = new
        w_parent = w_of.get(parent)
        wv = content_hash({"artifact_sha": None, "parent": w_parent, "base_model": "tiny", "kind": f"g{i}"})
        wv_rows.append({"id": wv, "artifact_sha": None, "weights_sha256": None, "parent": w_parent,
                        "base_model": "tiny", "kind": f"g{i}", "optimizer_artifact": None,
                        "stats": {"loss": rng.random()}, "created_at": now})
        w_of[i], pv_of[i] = wv, pv
        score = rng.random()
        gens.append({"id": i + 1, "run_id": run.id, "parent_id": None if parent is None else parent + 1,
                     "index": i, "prompt_version": pv, "weights_version": wv, "seeds": {"seed": i},
                     "status": "committed", "metrics": {"heldout_pass@1": score, "pass@16": min(1, 2 * score),
                                                        "train_reward": score / 2, "kl": 0.01},
                     "timings": {"total": 12.5}, "created_at": now, "committed_at": now})
    with store.engine.begin() as conn:
        conn.execute(insert(PromptVersion.__table__), pv_rows)
        conn.execute(insert(PromptParent.__table__), edges)
        conn.execute(insert(WeightsVersion.__table__), wv_rows)
        conn.execute(insert(Generation.__table__), gens)
    store.close()
    return run.name


def timed(cmd: list[str], repeats: int) -> tuple[float, int]:
    """Median wall time of a subprocess over ``repeats`` runs (one warm-up first), and its output size."""
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times), len(out)


def in_process(db: Path, run: str, repeats: int) -> tuple[float, float]:
    from evolve.lineage.render import lineage_lines, pick_metrics

    q, r = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        with LineageStore.open(str(db), create=False, auto_upgrade=False) as s:
            gens = s.lineage(run)
        t1 = time.perf_counter()
        lineage_lines(gens, pick_metrics(gens))
        q.append(t1 - t)
        r.append(time.perf_counter() - t1)
    return statistics.median(q), statistics.median(r)


def rich_tree(db: Path, run: str, limit: int) -> float:
    """A Rich Tree of the first ``limit`` generations (one nesting level per generation)."""
    from rich.console import Console
    from rich.tree import Tree

    with LineageStore.open(str(db), create=False, auto_upgrade=False) as s:
        gens = s.lineage(run)[:limit]
    t = time.perf_counter()
    nodes = {}
    root = Tree(run)
    for g in gens:
        parent = nodes.get(g["parent_id"], root)
        nodes[g["id"]] = parent.add(f"{g['name']} pv {g['prompt_version'][:8]} wv {g['weights_version'][:8]}")
    Console(file=io.StringIO(), width=200).print(root)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generations", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rich-limit", type=int, default=500, help="generations in the Rich Tree comparison")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "lineage.db"
        t = time.perf_counter()
        run = build(db, args.generations)
        build_s = time.perf_counter() - t
        r = args.repeats
        rows = [
            ("python -c pass (interpreter start)", *timed([PY, "-c", "pass"], r)),
            ("sqlite3 SELECT * FROM generation", *timed(
                [PY, "-c", f"import sqlite3; sqlite3.connect({str(db)!r}).execute("
                 "'SELECT * FROM generation').fetchall()"], r)),
            ("evolve runs", *timed([EVOLVE, "runs", "--db", str(db)], r)),
            ("evolve lineage RUN", *timed([EVOLVE, "lineage", run, "--db", str(db)], r)),
            ("evolve lineage RUN --json", *timed([EVOLVE, "lineage", run, "--db", str(db), "--json"], r)),
        ]
        query_s, render_s = in_process(db, run, r)
        rich_s = rich_tree(db, run, args.rich_limit)
    base = rows[0][1]
    print(f"lineage of {args.generations} generations (built in {build_s:.1f}s); median of {r} runs")
    print(f"{'what':42} {'seconds':>8} {'x start':>8} {'output':>10}")
    for name, s, size in rows:
        print(f"{name:42} {s:8.3f} {s / base:8.1f} {size:>10,}")
    print(f"{'  in-process: open + lineage query':42} {query_s:8.3f} {query_s / base:8.1f}")
    print(f"{'  in-process: text tree of all':42} {render_s:8.3f} {render_s / base:8.1f}")
    print(f"{f'  Rich Tree of first {args.rich_limit} (not used)':42} {rich_s:8.3f} {rich_s / base:8.1f}")
    print(f"interpreter_start_s={base:.3f}")
    print(f"evolve_runs_s={rows[2][1]:.3f}")
    print(f"lineage_10k_query_s={query_s:.3f}")
    print(f"lineage_10k_json_s={rows[4][1]:.3f}")
    print(f"lineage_10k_s={rows[3][1]:.3f}")


if __name__ == "__main__":
    main()
