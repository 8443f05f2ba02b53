"""Cost of one repo-fix verification run, and whether the sandbox changes any verdict.

For each task of a built set (``evolve repo-tasks build``): the hidden selection (FAIL_TO_PASS +
PASS_TO_PASS) on the buggy tree and on the pristine tree, through ``run_tests``, as the final grade
runs it. A verdict "agrees" when, as the factory found when it kept the task, on the buggy tree
every FAIL_TO_PASS fails and every PASS_TO_PASS passes, and on the pristine tree all pass.
``--baseline FILE`` (an older runner module, e.g. ``git show REV:evolve/repo/runner.py > /tmp/r.py``, with
``pytest_plugin.py`` copied next to it)
runs the same selections interleaved with the current runner, task by task, so that both see the
same machine load (this machine is shared: the load average is recorded, start and end).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/repo_runner_cost.py [--tasks N] [--baseline /tmp/r.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402

from evolve.env.repo_fix import RepoFixEnv, _spec  # noqa: E402
from evolve.repo import runner  # noqa: E402
from evolve.repo.factory import sandbox_paths  # noqa: E402
from evolve.repo.packages import load_packages  # noqa: E402


def _one(env: RepoFixEnv, task, impl) -> dict:
    f2p, p2p = task.meta["fail_to_pass"], task.meta["pass_to_pass"]
    paths, pristine = sandbox_paths(_spec(task)), env.pristine(task)
    with env.workspace(task, []) as buggy:  # pristine + the injected bug, no edits
        bug = impl.run_tests(pristine, buggy, f2p + p2p, paths)
    ok = impl.run_tests(pristine, None, f2p + p2p, paths)
    agree = (bug.complete and not any(bug.passed(n) for n in f2p) and all(bug.passed(n) for n in p2p)
             and ok.complete and all(ok.passed(n) for n in f2p + p2p))
    return {"task": task.task_id, "buggy_s": round(bug.seconds, 3), "pristine_s": round(ok.seconds, 3),
            "agree": agree, "tail": "" if agree else (bug.output[-600:] + "\n---\n" + ok.output[-600:])}


def _load(path: str):
    spec = importlib.util.spec_from_file_location("baseline_runner", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["baseline_runner"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _figures(label: str, rows: list[dict]) -> dict:
    secs = [r["buggy_s"] for r in rows] + [r["pristine_s"] for r in rows]
    return {f"repo_run_s_mean_{label}": round(statistics.mean(secs), 3),
            f"repo_run_s_median_{label}": round(statistics.median(secs), 3),
            f"repo_run_agree_{label}": sum(r["agree"] for r in rows)}


def _suites(env: RepoFixEnv, packages: str, impls: dict) -> list[dict]:
    """Each built package's whole pristine suite (what an agent's `test` call may ask for), once per
    runner: the outcome of every test must be the same under each."""
    rows = []
    for spec in load_packages(packages):
        src = env.cache / "src" / f"{spec.name}-{spec.version}"
        if not src.is_dir():
            continue
        got = {k: impl.run_tests(src, None, list(spec.tests), sandbox_paths(spec)) for k, impl in impls.items()}
        outs = {k: r.outcomes for k, r in got.items()}
        rows.append({"package": spec.name, "tests": len(outs["current"]), "same": len({json.dumps(o, sort_keys=True)
                     for o in outs.values()}) == 1, "passed": {k: sum(v == "passed" for v in o.values()) for k, o in outs.items()},
                     "seconds": {k: round(r.seconds, 2) for k, r in got.items()},
                     "differ": {n: {k: o.get(n) for k, o in outs.items()} for n in set().union(*outs.values())
                                if len({o.get(n) for o in outs.values()}) > 1}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks-file", default="runs/repo-tasks/tasks.jsonl")
    ap.add_argument("--tasks", type=int, default=0, help="first N tasks (0: all)")
    ap.add_argument("--baseline", default="", help="an older runner module file, run interleaved")
    ap.add_argument("--packages", default="verifiers/repo_packages.toml", help="for the whole-suite comparison")
    args = ap.parse_args()
    env = RepoFixEnv(Path(args.tasks_file))
    tasks = [t for s in env.splits().values() for t in s]
    tasks = tasks[: args.tasks] if args.tasks else tasks
    impls = {"current": runner} | ({"baseline": _load(args.baseline)} if args.baseline else {})
    load0, t0 = os.getloadavg(), time.monotonic()
    rows: dict[str, list[dict]] = {k: [] for k in impls}
    for t in tasks:
        for label, impl in impls.items():
            rows[label].append(_one(env, t, impl))
    suites = _suites(env, args.packages, impls)
    figures = {"repo_run_tasks": len(tasks), "repo_suites_same": sum(r["same"] for r in suites),
               "repo_suites": len(suites)}
    for label in impls:
        figures |= _figures(label, rows[label])
    if args.baseline:
        figures["repo_run_cost_ratio"] = round(figures["repo_run_s_mean_current"] / figures["repo_run_s_mean_baseline"], 3)
    machine = machine_facts(loadavg_start=[round(x, 2) for x in load0], wall_s=round(time.monotonic() - t0, 1),
                            isolation=runner.ISOLATION)
    write_results("repo_runner_cost", args=vars(args), results={"selections": rows, "suites": suites},
                  figures=figures, machine=machine)
    for label, rs in rows.items():
        for r in rs:
            if not r["agree"]:
                print(f"disagree ({label}): {r['task']}\n{r['tail']}", file=sys.stderr)
    print_figures(figures)


if __name__ == "__main__":
    main()
