"""CPU time (not wall time) of verifying HumanEval's 164 canonical solutions, split by role, cold and warm.

On a shared, loaded machine wall-clock rates say little; CPU time per problem and page faults do. Each
repetition runs in a fresh process (like the throughput benchmark: imports done and one verifier
already open and warm before the timed part), which prints one JSON row:

  cold: a fresh Verifier (plan every task, start the server, the batch, close): parent (self), bwrap
        (the parent's reaped children), server (self) and keepers+jobs (the server's reaped children)
  warm: one more batch on the verifier kept open: parent (self) and the server's process tree (from
        /proc: utime+stime+cutime+cstime of every process under bubblewrap, before and after)

    .venv/bin/python benchmarks/verify_cpu.py [--reps 5] [--warm 3] [--name NAME]   # -> verify_ab/NAME.json
    .venv/bin/python benchmarks/verify_cpu.py --ab OLD_TREE --reps 10 --name NAME    # old vs this tree

With ``--ab``, repetitions alternate between another checkout's code (e.g. a ``git archive`` of the
base commit) and this one (ABBA order), and the figures are both sides' medians and the median of the
paired differences: on a loaded machine, pairs run seconds apart see about the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TICK = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
        except OSError:
            pass
    return out


def _tree_cpu(pid: int) -> tuple[float, int]:
    """(CPU seconds, minor faults) of a process tree, each process with its reaped children."""
    cpu, flt = 0.0, 0
    for p in _tree(pid):
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu += sum(int(x) for x in f[11:15]) / _TICK
        flt += int(f[7]) + int(f[8])
    return cpu, flt


def _ru(who) -> tuple[float, int]:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime, r.ru_minflt


def one(warm_batches: int, root: Path) -> dict:
    sys.path.insert(0, str(root))
    from evolve.verification import Verifier, load_humaneval, load_pipeline

    pipe = load_pipeline(root / "verifiers" / "humaneval.toml")
    tasks = load_humaneval()
    pairs = [(t, t.canonical_solution) for t in tasks]
    keep = Verifier(pipe, jobs=2)
    keep.verify_batch(pairs)  # as in verify_throughput.py: a warm verifier exists before the cold runs
    row: dict = {"load": os.getloadavg()[0]}
    (s0, f0), (c0, _), t0 = _ru(resource.RUSAGE_SELF), _ru(resource.RUSAGE_CHILDREN), time.perf_counter()
    v = Verifier(pipe, jobs=2)
    with v:
        t_start = time.perf_counter()
        v.sandbox.ready()
        t_ready = time.perf_counter()
        res = v.verify_batch(pairs)
    wall = time.perf_counter() - t0
    (s1, f1), (c1, _) = _ru(resource.RUSAGE_SELF), _ru(resource.RUSAGE_CHILDREN)
    st = v.sandbox.last_stats or {}
    n = len(pairs)
    row["cold"] = {"passed": sum(r.passed for r in res), "wall_s": wall, "ready_s": t_ready - t_start,
                   "parent_ms": (s1 - s0) / n * 1e3, "bwrap_ms": (c1 - c0) / n * 1e3,
                   "server_ms": st.get("server_cpu_s", 0) / n * 1e3, "jobs_ms": st.get("jobs_cpu_s", 0) / n * 1e3,
                   "parent_flt": (f1 - f0) / n, "jobs_flt": st.get("jobs_minflt", 0) / n}
    row["cold"]["total_ms"] = sum(row["cold"][k] for k in ("parent_ms", "bwrap_ms", "server_ms", "jobs_ms"))
    warm = []
    with keep:
        pid = keep.sandbox._proc.popen.pid
        for _ in range(warm_batches):
            (s0, f0), (x0, y0), t0 = _ru(resource.RUSAGE_SELF), _tree_cpu(pid), time.perf_counter()
            res = keep.verify_batch(pairs)
            wall = time.perf_counter() - t0
            (s1, f1), (x1, y1) = _ru(resource.RUSAGE_SELF), _tree_cpu(pid)
            warm.append({"passed": sum(r.passed for r in res), "wall_s": wall, "parent_ms": (s1 - s0) / n * 1e3,
                         "sandbox_ms": (x1 - x0) / n * 1e3, "total_ms": (s1 - s0 + x1 - x0) / n * 1e3,
                         "sandbox_flt": (y1 - y0) / n})
    row["warm"] = warm
    row["load_after"] = os.getloadavg()[0]
    return row


def _run_one(root: Path, warm: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", "--warm", str(warm), "--root", str(root)],
                         capture_output=True, text=True, check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    return json.loads(out.stdout.splitlines()[-1])


def _warm_ms(row: dict) -> float:
    return statistics.median(x["total_ms"] for x in row["warm"])


def _medians(rows: list[dict]) -> dict:
    med = {"cold_ms": statistics.median(r["cold"]["total_ms"] for r in rows),
           "warm_ms": statistics.median(_warm_ms(r) for r in rows),
           "warm_flt": statistics.median(statistics.median(x["sandbox_flt"] for x in r["warm"]) for r in rows)}
    for k in ("parent_ms", "bwrap_ms", "server_ms", "jobs_ms", "parent_flt", "jobs_flt"):
        med[f"cold_{k}"] = statistics.median(r["cold"][k] for r in rows)
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--name", default="")
    ap.add_argument("--ab", type=Path, default=None, help="another checkout to alternate with (its code, this script)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.warm, args.root.resolve())))
        return
    sides = {"old": args.ab.resolve(), "new": ROOT} if args.ab else {"new": ROOT}
    rows = []
    for i in range(args.reps):
        for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            row = {"side": side, **_run_one(sides[side], args.warm)}
            rows.append(row)
            c = row["cold"]
            print(f"{side} load {row['load']:.2f}: cold {c['total_ms']:.2f} ms/problem (parent {c['parent_ms']:.2f}, "
                  f"bwrap {c['bwrap_ms']:.2f}, server {c['server_ms']:.2f}, keepers+jobs {c['jobs_ms']:.2f}; "
                  f"{c['jobs_flt']:.0f} faults/job), warm {_warm_ms(row):.2f} ms/problem", flush=True)
    figures = {f"{side}_{k}": round(v, 3) for side in sides for k, v in _medians([r for r in rows if r["side"] == side]).items()}
    if args.ab:
        for k, get in (("cold", lambda r: r["cold"]["total_ms"]), ("warm", _warm_ms)):
            old = [get(r) for r in rows if r["side"] == "old"]
            new = [get(r) for r in rows if r["side"] == "new"]
            diffs = [n - o for o, n in zip(old, new, strict=True)]
            figures[f"{k}_paired_diff_ms"] = round(statistics.median(diffs), 3)
            figures[f"{k}_pairs_lower"] = sum(d < 0 for d in diffs)
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    if args.name:
        from results_io import machine_facts, write_results

        write_results(args.name, args={k: str(v) for k, v in vars(args).items()}, results=rows, figures=figures,
                      out_dir=ROOT / "benchmarks" / "results" / "verify_ab",
                      machine=machine_facts(loadavg_per_rep=[r["load"] for r in rows]))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
