"""`evolve bootstrap` (default preset): wall time and the built model's held-out figures, as a results file.

The build measures itself (``bootstrap.json`` beside the model: timings, load average, held-out pass@k
by the sandboxed verifier on 80 held-out tasks x 16 samples). This script copies those figures into
``benchmarks/results/bootstrap.json``; it never builds unless ``--build`` is given (about 8-10 min on
2 cores), so the figures are those of the build that is in the runs cache.

    .venv/bin/python benchmarks/bootstrap_figures.py [--preset default] [--build]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default")
    ap.add_argument("--build", action="store_true", help="build the model when it is not in the cache")
    args = ap.parse_args()
    from evolve.policy.tiny import BootstrapConfig, ensure_tiny_model, is_complete, model_dir

    cfg = BootstrapConfig.preset(args.preset)
    path = model_dir(cfg, REPO / "runs")
    if not is_complete(path):
        if not args.build:
            raise SystemExit(f"bootstrap_figures: no built {args.preset} model at {path}; run `evolve bootstrap` "
                             "or pass --build")
        path = ensure_tiny_model(cfg, runs_dir=REPO / "runs", progress=True)
    manifest = json.loads((path / "bootstrap.json").read_text())
    fig, t = manifest["figures"], manifest["timings"]
    k = fig["k"]
    figures = {"build_s": round(t["total_s"], 1), "build_cpu_s": round(t["cpu_s"], 1),
               "heldout_pass@1": fig["pass@1"], f"heldout_pass@{k}": fig[f"pass@{k}"],
               "passk_ratio": fig["ratio"], "all_fail_task_share": fig["all_fail_task_share"]}
    for name, line in sorted(fig.get("lines", {}).items()):
        if name.startswith("note:") and line.get("applicable_delta") is not None:
            figures[f"{name}_applicable_delta"] = line["applicable_delta"]
    machine = machine_facts(loadavg=[t.get("loadavg_start"), t.get("loadavg_end")], measured_by="evolve bootstrap",
                            build_code_version=manifest.get("code_version"))
    write_results("bootstrap", args=vars(args), figures=figures, machine=machine,
                  results={"model": str(path.name), "n_params": manifest.get("n_params"), "timings": t,
                           "figures": fig, "config": manifest["config"], "weights_sha256": manifest["weights_sha256"]})
    print_figures(figures)


if __name__ == "__main__":
    main()
