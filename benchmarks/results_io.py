"""One format for every benchmark's raw results: ``benchmarks/results/<name>.json``.

Each file holds the commit, machine facts (CPU kind, cores, load average, platform), the arguments, the raw
results and the headline ``figures`` (the same ``name=value`` pairs the benchmark prints last).
The docs' figures (README headline, docs/results.md, docs/ablation.md) are generated from these files
(``scripts/readme_figures.py``).

    from results_io import write_results, print_figures
    figures = {"ratio_vs_trl": 0.93}
    write_results("grpo_step", args=vars(args), results=raw, figures=figures)
    print_figures(figures)
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_facts(**extra) -> dict:
    """The CPU (``evolve.util.cpu.cpu_kind``: every speed figure names its CPU), cores, load average and
    platform at the moment of the call, plus anything the caller adds (for example ``isolation=``)."""
    from evolve.util.cpu import cpu_kind  # noqa: PLC0415 - evolve is installed in the venv (editable)

    facts = {
        "cpu": cpu_kind(),
        "cores": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    try:
        import torch  # noqa: PLC0415 - optional, only for the version

        facts["torch"] = torch.__version__
    except ImportError:
        pass
    facts.update(extra)
    return facts


def write_results(name: str, *, args: dict, results, figures: dict, machine: dict | None = None,
                  out_dir: Path | None = None) -> Path:
    """Write ``<out_dir or benchmarks/results>/<name>.json`` atomically and return its path."""
    out = Path(out_dir or RESULTS_DIR)
    out.mkdir(parents=True, exist_ok=True)
    # Dirty = code differs from the commit; other results files being rewritten in the same session do not count.
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results"))
    doc = {
        "benchmark": name,
        "commit": _git("rev-parse", "HEAD") + ("+dirty" if dirty else ""),
        "written_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": machine or machine_facts(),
        "args": args,
        "figures": figures,
        "results": results,
    }
    path = out / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return path


def print_figures(figures: dict) -> None:
    """The headline figures, last, as ``name=value`` lines."""
    for key, value in figures.items():
        print(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
