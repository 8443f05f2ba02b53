"""The power of the shipped ablation configs' prompt-promotion test (issue 37 item 1), from the tool itself:
`evolve plan`'s table (evolve/loop/power.py) of each config, at `evolve plan`'s default trials, plus the
seconds the smaller start-up table of `evolve run` takes at each shape (what a run's start-up pays).

    python benchmarks/power.py [--trials 2000] [--seed 0]

Writes benchmarks/results/power.json; docs/ablation.md ("Power") quotes it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402

sys.path.insert(0, str(REPO))
from evolve.loop.config import LoopConfig  # noqa: E402
from evolve.loop.power import RUN_TRIALS, TRIALS, config_power, model_key, power_lines  # noqa: E402
from evolve.policy import PolicySpec  # noqa: E402

CONFIGS = {"qwen": "configs/ablation-qwen-humaneval.toml", "gym": "configs/ablation.toml",
           "qwen_powered": "configs/ablation-qwen-humaneval-powered.toml"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=TRIALS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    results, figures = {}, {}
    for name, path in CONFIGS.items():
        cfg = LoopConfig.from_toml(REPO / path)
        model = model_key(PolicySpec.from_toml(REPO / cfg.policy))
        table = config_power(cfg, model, args.trials, args.seed)
        t0, c0 = time.perf_counter(), time.process_time()
        config_power(cfg, model, RUN_TRIALS, args.seed)
        table["run_startup"] = {"trials": RUN_TRIALS, "wall_s": round(time.perf_counter() - t0, 2),
                                "cpu_s": round(time.process_time() - c0, 2)}
        results[path] = table
        print("\n".join([path, *power_lines(table)]), flush=True)
        for row in table["rows"]:
            for model_name in ("crn", "independent"):
                figures[f"{name}_{row['effect_points']:g}pt_{model_name}"] = row[model_name]
        figures[f"{name}_run_startup_cpu_s"] = table["run_startup"]["cpu_s"]
    write_results("power", args=vars(args), results=results, figures=figures, machine=machine_facts())
    print_figures(figures)


if __name__ == "__main__":
    main()
