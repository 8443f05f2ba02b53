"""Cost of one repo-fix grade (``RepoVerifier.verify_conversations``, one transcript), current code vs
an older tree, and the cost of the edit check alone (``editcheck.check_edit``) on the real packages.

The tasks: the vendored test package (tests/repo/data, built here with the real factory, seed 0,
2 tasks) unless ``--tasks-file`` names a built set. Per task and repetition, two transcripts are
graded: the genuine fix (undo the injected diff: the edit check runs, then the sandboxed pytest
run) and the empty one (the bug as built). Each side runs in its own worker process (``--worker``)
with its own PYTHONPATH, rounds interleaved in alternating order (current then baseline, then
baseline then current, ...) so both see the same load on this shared machine (load average recorded).

    git archive REV | tar -x -C /tmp/base      # the tree before
    PYTHONPATH=$PWD .venv/bin/python benchmarks/repo_grade_cost.py --baseline-tree /tmp/base \\
        [--rounds 2 --reps 5] [--cache runs/repo-tasks/cache]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _build_minicalc(dest: Path) -> Path:
    spec = importlib.util.spec_from_file_location("repo_conftest", HERE.parent / "tests" / "repo" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    from evolve.repo.factory import BuildParams, build
    from evolve.repo.packages import load_packages

    build(load_packages(conftest.packages_toml(dest)), dest / "out", BuildParams(seed=0, per_package=2, max_tries=8))
    return dest / "out" / "tasks.jsonl"


def _fix(task) -> str:
    diff = task.meta["diff"].splitlines()
    minus = [ln[1:] for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    return json.dumps({"tool": "edit", "path": task.meta["file"], "search": "\n".join(plus), "replace": "\n".join(minus)})


def worker(tasks_file: str, reps: int) -> dict:
    """Grade each task's fix and empty transcripts ``reps`` times; seconds per grade, and the verdicts."""
    from evolve.env.repo_fix import load_environment

    env = load_environment(repo_tasks=tasks_file)
    verifier = env.wrap_verifier(None)
    out = {"fix_s": [], "empty_s": [], "verdicts": []}
    for task in [t for s in env.splits().values() for t in s]:
        head = env.first_messages({}, task)
        for _ in range(reps):
            for kind, msgs in (("fix", head + [{"role": "assistant", "content": _fix(task)}]), ("empty", head)):
                t0 = time.perf_counter()
                (res,) = verifier.verify_conversations([(task, msgs)])
                out[f"{kind}_s"].append(time.perf_counter() - t0)
                out["verdicts"].append([task.task_id, kind, res.reward])
    return out


def _check_cost(cache: Path, packages: str) -> list[dict]:
    """check_edit on every source file of the built packages: a one-line edit inside a function body
    (each file's first ``return``), cold (first parse of the pristine file) and warm (cached)."""
    from evolve.repo.editcheck import _model, check_edit
    from evolve.repo.packages import load_packages

    rows = []
    for spec in load_packages(packages):
        root = cache / "src" / spec.key
        for rel in spec.source if root.is_dir() else []:
            data = (root / rel).read_bytes()
            edited = data.replace(b"    return ", b"    return  ", 1)
            _model.cache_clear()
            t0 = time.perf_counter()
            verdict = check_edit(rel, data, edited)
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            check_edit(rel, data, edited)
            rows.append({"file": f"{spec.key}/{rel}", "bytes": len(data), "cold_ms": round(cold * 1e3, 2),
                         "warm_ms": round((time.perf_counter() - t0) * 1e3, 2), "admitted": verdict is None})
    return rows


def _run_worker(pythonpath: str, tasks_file: str, reps: int) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--tasks-file", tasks_file,
                           "--reps", str(reps)], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def _stats(xs: list[float]) -> dict:
    return {"n": len(xs), "mean_s": round(statistics.mean(xs), 3), "median_s": round(statistics.median(xs), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks-file", default="", help="a built tasks.jsonl (default: build the vendored package)")
    ap.add_argument("--baseline-tree", default="", help="an older source tree (git archive REV), run interleaved")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5, help="grades per task and transcript kind, per round")
    ap.add_argument("--cache", default="", help="a repo-tasks cache (sdists unpacked) for the edit-check cost")
    ap.add_argument("--packages", default="verifiers/repo_packages.toml")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.tasks_file, args.reps)))
        return
    sys.path.insert(0, str(HERE))
    from results_io import machine_facts, print_figures, write_results

    tmp = tempfile.mkdtemp(prefix="evolve-grade-cost-")
    tasks_file = args.tasks_file or str(_build_minicalc(Path(tmp)))
    sides = {"current": os.environ.get("PYTHONPATH", str(HERE.parent))}
    if args.baseline_tree:
        sides["baseline"] = str(Path(args.baseline_tree).resolve())
    load0, t0 = os.getloadavg(), time.monotonic()
    got: dict[str, dict] = {k: {"fix_s": [], "empty_s": [], "verdicts": []} for k in sides}
    for i in range(args.rounds):  # the order alternates: neither side always runs first in a round
        for label, path in (list(sides.items()) if i % 2 == 0 else list(sides.items())[::-1]):
            for k, v in _run_worker(path, tasks_file, args.reps).items():
                got[label][k] += v
    figures = {}
    for label, g in got.items():
        for kind in ("fix", "empty"):
            s = _stats(g[f"{kind}_s"])
            figures[f"repo_grade_{kind}_s_mean_{label}"] = s["mean_s"]
            figures[f"repo_grade_{kind}_s_median_{label}"] = s["median_s"]
        figures[f"repo_grade_fix_resolved_{label}"] = sum(r == 1.0 for _, k, r in g["verdicts"] if k == "fix")
        figures[f"repo_grade_empty_resolved_{label}"] = sum(r == 1.0 for _, k, r in g["verdicts"] if k == "empty")
    if args.baseline_tree:
        for kind in ("fix", "empty"):
            figures[f"repo_grade_{kind}_ratio"] = round(figures[f"repo_grade_{kind}_s_mean_current"]
                                                        / figures[f"repo_grade_{kind}_s_mean_baseline"], 3)
    checks = _check_cost(Path(args.cache), args.packages) if args.cache else []
    if checks:
        figures["edit_check_ms_cold_max"] = max(r["cold_ms"] for r in checks)
        figures["edit_check_ms_warm_max"] = max(r["warm_ms"] for r in checks)
    machine = machine_facts(loadavg_start=[round(x, 2) for x in load0], wall_s=round(time.monotonic() - t0, 1),
                            cpu="AMD EPYC (avx512, avx512_bf16; no AMX)")
    write_results("repo_grade_cost", args=vars(args) | {"tasks_file": tasks_file},
                  results={"grades": got, "edit_check": checks}, figures=figures, machine=machine)
    print_figures(figures)


if __name__ == "__main__":
    main()
