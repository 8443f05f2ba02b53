"""Stage 2 of the headroom probe (issue 37 item 3; docs/headroom.md): stage 1's best candidates drawn again,
8 fresh draws a training problem each and the seed's too, so that a line worth +5 points would show.

Stage 1 (benchmarks/headroom.py) gave every candidate one draw a problem (a 95% interval of about ±7.5 points)
and ranked them. The best of many noisy differences is biased upwards (the winner's curse), so stage 2 never
reuses the draw that picked them: its effects are over draws 1..8 only. Draw i of problem t has the request
seed ``request_seed(seed, t, i)`` under every candidate, as in stage 1 (common random numbers). If the spread of
the per-problem differences is all draw noise, 8 draws shrink stage 1's standard error of ~3.7 points to ~1.3,
an interval of about ±2.6 (±3.3 family-wise over 5); a line that helps some problems and hurts others
narrows less. The names are frozen in this script's results file the first time it writes it.

Records are stage 1's (runs/headroom/0.5b/<candidate>.jsonl, draws 1..8 appended); the draws this stage adds
are also kept in ``headroom_humaneval_stage2_samples.jsonl.gz``, so another machine continues from the files.
Draws are taken two at a time under every candidate, so a run stopped part way summarizes with ``--draws`` set
to the whole draws it has:

    .venv-vllm/bin/python benchmarks/headroom_stage2.py            # samples what is missing, then summarizes
    .venv/bin/python benchmarks/headroom_stage2.py --summarize-only
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))
import headroom  # noqa: E402
from results_io import RESULTS_DIR, machine_facts, print_figures, write_results  # noqa: E402

NAME = "headroom_humaneval_stage2"
SAMPLES_GZ = RESULTS_DIR / f"{NAME}_samples.jsonl.gz"


def pick(stage1: dict, k: int) -> list[str]:
    """Stage 1's best ``k`` candidates (its rows are sorted best first; ties keep the sampling order)."""
    return [r["name"] for r in stage1["results"]["candidates"][:k]]


def frozen_names(k: int) -> list[str]:
    path = RESULTS_DIR / f"{NAME}.json"
    if path.exists():
        return json.loads(path.read_text())["results"]["names"]
    return pick(json.loads((RESULTS_DIR / "headroom_humaneval.json").read_text()), k)


def restore(out_dir: Path) -> int:
    """Appends the kept stage-2 draws a record file lacks (a new machine); how many."""
    if not SAMPLES_GZ.exists():
        return 0
    added = 0
    with gzip.open(SAMPLES_GZ, "rt") as f:
        rows = [json.loads(x) for x in f if x.strip()]
    for name in sorted({r["candidate"] for r in rows}):
        have = {(r["task_id"], r["sample"]) for r in headroom.read_records(out_dir, name)}
        new = [r for r in rows if r["candidate"] == name and (r["task_id"], r["sample"]) not in have]
        with headroom.records_path(out_dir, name).open("a") as g:
            g.writelines(json.dumps(r) + "\n" for r in new)
        added += len(new)
    return added


def summarize(out_dir: Path, names: list[str], n_draws: int) -> dict:
    recs = {n: headroom.read_records(out_dir, n) for n in ["seed", *names]}
    seed = headroom.by_task(recs["seed"], 1 + n_draws, first=1)
    rows = []
    for n in names:
        eff = headroom.paired_effect(seed, headroom.by_task(recs[n], 1 + n_draws, first=1), family=len(names))
        rows.append({"name": n, **eff})
    with gzip.open(SAMPLES_GZ, "wt") as f:
        for rs in recs.values():
            f.writelines(json.dumps(r) + "\n" for r in rs if 1 <= r["sample"] <= n_draws)
    best = max(rows, key=lambda r: r["diff"])
    figures = {"candidates": len(rows), "draws": n_draws, "tasks": best["tasks"],
               "seed_pass1": best["seed_pass1"], "best_candidate": best["name"],
               "best_diff_points": round(100 * best["diff"], 1),
               "best_ci95_low_points": round(100 * best["ci95"][0], 1),
               "best_ci95_high_points": round(100 * best["ci95"][1], 1),
               "above_ci95": sum(r["ci95"][0] > 0 for r in rows), "above_family": sum(r["ci_family"][0] > 0 for r in rows),
               "median_se_points": round(100 * sorted(r["se"] for r in rows)[len(rows) // 2], 1)}
    write_results(NAME, args={"draws": n_draws, "first_draw": 1, "stage1": "headroom_humaneval.json"},
                  results={"names": names, "candidates": rows,
                           "method": "stage 1's best candidates, draws 1..N only (draw 0 picked them); paired "
                                     "per-task differences against the seed's draws 1..N under common seeds, normal "
                                     "intervals, family = Bonferroni over the candidates"},
                  figures=figures, machine=machine_facts())
    for r in rows:
        print(f"{r['name']:>18} {100 * r['diff']:+.1f} [{100 * r['ci95'][0]:+.1f}, {100 * r['ci95'][1]:+.1f}] points, "
              f"{r['tasks']} problems")
    print_figures(figures)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=5, help="stage 1's best N (frozen once written)")
    ap.add_argument("--draws", type=int, default=8, help="fresh draws a problem (draws 1..N)")
    ap.add_argument("--summarize-only", action="store_true")
    args = ap.parse_args()
    out_dir = headroom.REPO / "runs" / "headroom" / "0.5b"
    out_dir.mkdir(parents=True, exist_ok=True)
    if headroom.restore(out_dir):
        print(f"stage 2: restored stage 1's candidates and records into {out_dir}")
    print(f"stage 2: restored {restore(out_dir)} kept draws")
    names = frozen_names(args.candidates)
    if not args.summarize_only:
        headroom.run(SimpleNamespace(suite=headroom.HUMANEVAL, model="0.5b", samples=1 + args.draws, seed=0,
                                     kinds=None, kv_gib=4.0, nucleus="nucleus-topk", out_dir=out_dir, only=names,
                                     sample_steps=sorted({*range(3, 2 + args.draws, 2), 1 + args.draws})))
    summarize(out_dir, names, args.draws)


if __name__ == "__main__":
    main()
