"""Task-factory figures: tasks per package and verification seconds per task, from a build report.

    PYTHONPATH=$PWD .venv/bin/python -m evolve repo-tasks build          # writes runs/repo-tasks/report.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/repo_tasks_build.py [--report runs/repo-tasks/report.json]

The report carries the build's own load average (``loadavg_start``/``loadavg_end``) when the build
recorded it; ``--load-note`` adds one measured outside (e.g. ``uptime`` at the end of an older build).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", default="runs/repo-tasks/report.json")
    ap.add_argument("--wall-s", type=float, default=None, help="the build's wall time when the report lacks it")
    ap.add_argument("--load-note", default="")
    args = ap.parse_args()
    report = json.loads(Path(args.report).read_text())
    per = {p["package"]: p for p in report["packages"]}
    secs = [s for p in report["packages"] for s in p["verify_s"]]
    cpu = [s for p in report["packages"] for s in p.get("verify_cpu_s", [])]  # reports since wait4 accounting
    figures = {"repo_tasks_total": report["tasks"], "repo_tasks_packages": len(per),
               "repo_tasks_heldout_packages": sum(p["split"] == "heldout" for p in per.values()),
               "repo_task_verify_s_median": round(statistics.median(secs), 2) if secs else 0.0,
               "repo_task_verify_s_max": round(max(secs), 2) if secs else 0.0,
               **({"repo_task_verify_cpu_s_median": round(statistics.median(cpu), 2)} if cpu else {}),
               "repo_tasks_build_s": report.get("build_seconds", args.wall_s)}
    for name, p in per.items():
        figures[f"repo_tasks_{name.rsplit('-', 1)[0].replace('-', '_')}"] = p["kept"]
    write_results("repo_tasks_build", args=vars(args), results={"report": report, "load_note": args.load_note},
                  figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
