"""CPU time (not wall time) of verifying HumanEval's 164 canonical solutions, split by role, cold and warm.

On a shared, loaded machine wall-clock rates say little; CPU time per problem and page faults do. Each
repetition runs in a fresh process (like the throughput benchmark: imports done and one verifier
already open and warm before the timed part), which prints one JSON row:

  cold: a fresh Verifier (plan every task, start the server, the batch, close): parent (self), bwrap
        (the parent's reaped children), server (self) and keepers+jobs (the server's reaped children)
  warm: one more batch on the verifier kept open: parent (self) and the server's process tree (from
        /proc: utime+stime+cutime+cstime of every process under bubblewrap, before and after)

    .venv/bin/python benchmarks/verify_cpu.py [--reps 5] [--warm 3] [--name NAME]   # -> verify_ab/NAME.json
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


def one(warm_batches: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from evolve.verification import Verifier, load_humaneval, load_pipeline

    pipe = load_pipeline(ROOT / "verifiers" / "humaneval.toml")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--name", default="")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.warm)))
        return
    rows = []
    for _ in range(args.reps):
        out = subprocess.run([sys.executable, __file__, "--one", "--warm", str(args.warm)], capture_output=True,
                             text=True, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        rows.append(json.loads(out.stdout.splitlines()[-1]))
        c = rows[-1]["cold"]
        w = statistics.median(x["total_ms"] for x in rows[-1]["warm"])
        print(f"load {rows[-1]['load']:.2f}: cold {c['total_ms']:.2f} ms/problem (parent {c['parent_ms']:.2f}, "
              f"bwrap {c['bwrap_ms']:.2f}, server {c['server_ms']:.2f}, jobs {c['jobs_ms']:.2f}; "
              f"{c['wall_s']:.2f} s, ready {c['ready_s'] * 1e3:.0f} ms), warm {w:.2f} ms/problem", flush=True)
    med = {"cold_ms": statistics.median(r["cold"]["total_ms"] for r in rows),
           "warm_ms": statistics.median(statistics.median(x["total_ms"] for x in r["warm"]) for r in rows)}
    for k in ("parent_ms", "bwrap_ms", "server_ms", "jobs_ms", "parent_flt", "jobs_flt"):
        med[f"cold_{k}"] = statistics.median(r["cold"][k] for r in rows)
    print(" ".join(f"{k}={v:.3f}" for k, v in med.items()))
    if args.name:
        from results_io import write_results

        write_results(args.name, args=vars(args), results=rows, figures=med,
                      out_dir=ROOT / "benchmarks" / "results" / "verify_ab",
                      machine={"loadavg": [r["load"] for r in rows]})


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
