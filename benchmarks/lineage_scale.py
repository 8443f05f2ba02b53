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
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert

sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

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


def timed(cmd: list[str], repeats: int) -> tuple[float, float, int]:
    """Median wall and CPU (user+sys) seconds of a subprocess over ``repeats`` runs (after a warm-up),
    and its output size. CPU time is what the command costs; wall time also counts waiting for a
    core, which on a shared 2-core machine can be most of it."""
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    walls, cpus = [], []
    for _ in range(repeats):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        walls.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(walls), statistics.median(cpus), len(out)


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


def rollout_insert(db: Path, n: int = 1000) -> tuple[float, float]:
    """add_rollouts of one generation's ``n`` rollouts, vs sqlite3 executemany of the same rows."""
    import json
    import sqlite3

    from evolve.lineage.queries import rollout_row
    from evolve.rollout import Rollout
    from evolve.verification.types import StageResult, VerifyResult

    res = VerifyResult("t", 0.0, False, [StageResult("hidden", 0.0, False, trace="expected 1, got 2")],
                       trace="expected 1, got 2", error_class="WrongAnswer")
    rs = [Rollout(f"t{i // 8}", i // 8, i % 8, "p" * 64, "w" * 64, [], "prompt " * 40, "def f(x):\n    return x\n" * 4,
                  result=res, reward=0.0, advantage=0.1) for i in range(n)]
    with LineageStore.open(str(db)) as s:
        s.create_run("ins", {})
        gid = s.begin_generation("ins", None, {})
        t = time.perf_counter()
        s.add_rollouts(gid, rs)
        ours = time.perf_counter() - t
        gid2 = s.begin_generation("ins", None, {})
    rows = [rollout_row(gid2, r) for r in rs]
    cols = list(rows[0])
    con = sqlite3.connect(db)
    t = time.perf_counter()
    con.executemany(f"INSERT INTO rollout ({', '.join('group_index' if c == 'group' else c for c in cols)}) "
                    f"VALUES ({', '.join('?' * len(cols))})",
                    [[json.dumps(v) if isinstance(v, (list, dict)) else v for v in r.values()] for r in rows])
    con.commit()
    raw = time.perf_counter() - t
    con.close()
    return ours, raw


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
            ("evolve check RUN (no artifacts to hash)", *timed([EVOLVE, "check", run, "--db", str(db)], r)),
            ("evolve diff RUN:10 RUN:LAST", *timed([EVOLVE, "diff", f"{run}:10", f"{run}:{args.generations - 1}",
                                                    "--db", str(db)], r)),
        ]
        query_s, render_s = in_process(db, run, r)
        rich_s = rich_tree(db, run, args.rich_limit)
        ins_s, raw_ins_s = rollout_insert(Path(tmp) / "ins.db")
    base, runs = rows[0][1], rows[2][1]
    print(f"lineage of {args.generations} generations (built in {build_s:.1f}s); median of {r} runs; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'what':42} {'wall s':>7} {'cpu s':>7} {'x start':>8} {'x runs':>7} {'output':>10}")
    for name, wall, cpu, size in rows:
        print(f"{name:42} {wall:7.3f} {cpu:7.3f} {wall / base:8.1f} {wall / runs:7.2f} {size:>10,}")
    print(f"{'in-process: open + lineage query':42} {query_s:7.3f} {'':>7} {query_s / base:8.1f}")
    print(f"{'in-process: text tree of all':42} {render_s:7.3f} {'':>7} {render_s / base:8.1f}")
    print(f"{f'Rich Tree of first {args.rich_limit} (not used)':42} {rich_s:7.3f} {'':>7} {rich_s / base:8.1f}")
    print(f"{'add_rollouts, 1000 rollouts':42} {ins_s:7.3f} {'':>7} {'':>8} {'':>7}   x{ins_s / raw_ins_s:.1f} raw")
    print(f"{'  raw sqlite3 executemany, same rows':42} {raw_ins_s:7.3f}")
    tag = f"{args.generations // 1000}k" if args.generations >= 1000 else str(args.generations)
    figures = {
        "interpreter_start_s": round(base, 3),
        "add_rollouts_1000_s": round(ins_s, 3),
        "evolve_runs_s": round(runs, 3),
        f"lineage_{tag}_query_s": round(query_s, 3),
        f"lineage_{tag}_json_s": round(rows[4][1], 3),
        f"lineage_{tag}_cpu_s": round(rows[3][2], 3),
        f"lineage_{tag}_s": round(rows[3][1], 3),
    }
    write_results("lineage_scale", args=vars(args), figures=figures, results={
        "build_s": build_s, "subprocess": [{"what": n, "wall_s": w, "cpu_s": c, "output_bytes": z}
                                           for n, w, c, z in rows],
        "in_process_query_s": query_s, "in_process_render_s": render_s, "rich_tree_s": rich_s,
        "add_rollouts_1000_s": ins_s, "raw_executemany_1000_s": raw_ins_s})
    print_figures(figures)

if __name__ == "__main__":
    main()
