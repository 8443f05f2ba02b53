"""The built repo tasks' verdicts under the current grader: every task's genuine fix (undo the injected
diff) must score 1 and its empty transcript 0; and the build itself (kept / tried / pristine-passing
tests per package, which depend on every candidate's sandboxed verdicts) is compared with an
earlier build's report (``--reference``, a results file written by benchmarks/repo_tasks_build.py).

    PYTHONPATH=$PWD .venv/bin/python -m evolve repo-tasks build --out /tmp/b --seed 0 --per-package 4 --max-tries 20
    PYTHONPATH=$PWD .venv/bin/python benchmarks/repo_task_verdicts.py --tasks-file /tmp/b/tasks.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from repo_grade_cost import _fix  # noqa: E402
from results_io import machine_facts, print_figures, write_results  # noqa: E402

from evolve.env.repo_fix import load_environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks-file", required=True)
    ap.add_argument("--reference", default="benchmarks/results/repo_tasks_build.json")
    args = ap.parse_args()
    env = load_environment(repo_tasks=args.tasks_file)
    verifier = env.wrap_verifier(None)
    load0, t0 = os.getloadavg(), time.monotonic()
    rows = []
    for task in [t for s in env.splits().values() for t in s]:
        head = env.first_messages({}, task)
        fix, empty = verifier.verify_conversations([(task, head + [{"role": "assistant", "content": _fix(task)}]),
                                                    (task, head)])
        rows.append({"task": task.task_id, "function": task.meta["function"], "fix": fix.reward, "empty": empty.reward,
                     "fix_trace": fix.trace[:200]})
    built = json.loads((Path(args.tasks_file).parent / "report.json").read_text())["packages"]
    ref = json.loads(Path(args.reference).read_text())["results"]["report"]["packages"]
    keys = ("package", "kept", "tried")
    same = [{k: p[k] for k in keys} for p in built] == [{k: p[k] for k in keys} for p in ref]
    # the pristine suite's passing count depends on the sandbox of the day (six's test_getoutput: fork denied)
    base = {b["package"]: f"{r['baseline_passed']} -> {b['baseline_passed']}" for b, r in zip(built, ref, strict=False)
            if b["baseline_passed"] != r["baseline_passed"]}
    figures = {"repo_tasks": len(rows), "repo_tasks_fix_resolved": sum(r["fix"] == 1.0 for r in rows),
               "repo_tasks_empty_resolved": sum(r["empty"] == 1.0 for r in rows),
               "repo_build_kept_tried_same_as_reference": same, "repo_build_baseline_passed_changed": base}
    machine = machine_facts(loadavg_start=[round(x, 2) for x in load0], wall_s=round(time.monotonic() - t0, 1),
                            cpu="AMD EPYC (avx512, avx512_bf16; no AMX)")
    write_results("repo_task_verdicts", args=vars(args), results={"tasks": rows, "build": built},
                  figures=figures, machine=machine)
    print_figures(figures)


if __name__ == "__main__":
    main()
