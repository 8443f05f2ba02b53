"""HumanEval's tests augmented (issue 39): mutation score over non-equivalent mutants before and after,
tests added a task, the gold solutions under the new tests, the reference's findings, and the wall time.

1. ``augment`` (seed S): the self-check of the 164 tasks, survivors classified on S's generated inputs,
   a greedy set of generated tests that kill the non-equivalent ones; the reference on its docstrings'
   examples; the gold solutions verified against the new version. Timed as a whole: the "augmentation".
2. Evaluation on an independent seed (S+1 by default), so the score is not measured on the very inputs
   the tests were picked from: the original survivors classified again on S+1's inputs
   (``classify_again``); the augmented tasks' self-check (no classification); a survivor of the
   augmented tests counts as equivalent when S+1's inputs found it equivalent.

    nice -n 10 .venv/bin/python benchmarks/verifier_augment.py [--seed 0] [--inputs 100] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402


def _score(killed: int, mutants: int, equivalent: int) -> float:
    return round(killed / (mutants - equivalent), 4) if mutants > equivalent else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-seed", type=int, default=None, help="default: seed + 1")
    ap.add_argument("--inputs", type=int, default=100)
    ap.add_argument("--max-added", type=int, default=20)
    ap.add_argument("--max-mutants", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="the first N tasks only (a smoke run)")
    ap.add_argument("--out", default=str(REPO / "runs" / "verifier_versions" / "humaneval-augmented.json"))
    args = ap.parse_args()
    eval_seed = args.seed + 1 if args.eval_seed is None else args.eval_seed
    from evolve.verification import Verifier, load_humaneval, load_pipeline
    from evolve.verification.augment import apply_version, augment, version_doc, write_version
    from evolve.verification.docexamples import reference_findings
    from evolve.verification.selfcheck import classify_again, self_check

    tasks = load_humaneval(args.limit)
    load0 = os.getloadavg()
    with Verifier(load_pipeline(REPO / "verifiers" / "humaneval.toml"), jobs=args.jobs) as v:
        v.isolation  # noqa: B018 - start the server before the clock (the CLI's start is not the work)
        t0 = time.monotonic()
        report, augs = augment(v, tasks, seed=args.seed, inputs=args.inputs, max_added=args.max_added,
                               max_mutants=args.max_mutants)
        findings, fcounts = reference_findings(v, tasks)
        doc = version_doc(v.pipeline, tasks, report, augs, source="humaneval", inputs=args.inputs,
                          max_added=args.max_added, max_mutants=args.max_mutants, findings=findings)
        new = apply_version(v.pipeline, tasks, doc)
        gold = [(t, t.canonical_solution) for t in new]
        rejected = [{"task_id": t.task_id, "trace": r.trace[:300]}
                    for (t, _), r in zip(gold, v.verify_batch(gold), strict=True) if not r.passed]
        t_aug = time.monotonic() - t0
        doc["counts"]["gold_rejected"] = len(rejected)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        write_version(Path(args.out), doc)
        load1 = os.getloadavg()
        t1 = time.monotonic()
        before = classify_again(v, tasks, report, args.inputs, eval_seed)
        after = self_check(v, new, max_mutants=args.max_mutants, equiv_inputs=0)
        t_eval = time.monotonic() - t1
        isolation = v.isolation
    per_task, tot = _compare(before, after, augs)
    c = doc["counts"]
    figures = {
        "mutation_score_all_before": round(tot["killed_before"] / tot["mutants"], 4),
        "mutation_score_all_after": round(tot["killed_after"] / tot["mutants"], 4),
        "mutation_score_non_equivalent_before": _score(tot["killed_before"], tot["mutants"], tot["eq_before"]),
        "mutation_score_non_equivalent_after": _score(tot["killed_after"], tot["mutants"], tot["eq_after"]),
        "mutants": tot["mutants"], "probably_equivalent_eval_seed": tot["eq_before"],
        "tests_added": c["tests_added"], "tests_added_per_task": c["tests_added_per_task"],
        "tasks_augmented": c["tasks_augmented"], "gold_rejected": len(rejected),
        "reference_raised_inputs": c["reference_raised"], "docstring_findings": len(findings),
        "augment_wall_s": round(t_aug, 1), "eval_wall_s": round(t_eval, 1),
        # the same-seed view (the inputs the tests were picked from): what the augmentation itself saw
        "same_seed_non_equivalent_before": report.score_non_equivalent and round(report.score_non_equivalent, 4),
        "same_seed_survivors_killed": c["survivors_killed"], "same_seed_non_equivalent_survivors":
            c["survivors"] - c["probably_equivalent"],
    }
    results = {"per_task": per_task, "counts": c, "docstring_counts": fcounts, "gold_rejected": rejected,
               "reference_findings": doc["reference_findings"], "raised": {t: d["raised_examples"] for t, d in
                                                                          doc["tasks"].items() if d["raised_examples"]},
               "skipped": {t: d["skipped"] for t, d in doc["tasks"].items() if d["skipped"]},
               "version": doc["version"], "source_verifier": doc["source_verifier"], "eval_seed": eval_seed,
               "version_file": str(Path(args.out).relative_to(REPO)) if Path(args.out).is_relative_to(REPO)
               else args.out}
    machine = machine_facts(isolation=isolation, loadavg_before=[round(x, 2) for x in load0],
                            loadavg_after_augment=[round(x, 2) for x in load1], nice=os.nice(0),
                            cpu=_cpu_model(), quiet=False)
    write_results("verifier_augment", args=vars(args), results=results, figures=figures, machine=machine)
    print_figures(figures)


def _compare(before, after, augs) -> tuple[list[dict], dict]:
    """Per task with survivors, and in total: mutants, killed by the tests before and after, probably
    equivalent (the evaluation seed's classification; after: those of them that still survive)."""
    per_task, tot = [], {"mutants": 0, "killed_before": 0, "killed_after": 0, "eq_before": 0, "eq_after": 0}
    aug_of = {a.task_id: a for a in augs}
    for b, a in zip(before.tasks, after.tasks, strict=True):
        aug = aug_of.get(b.task_id)
        assert b.task_id == a.task_id and b.mutants == a.mutants, (b.task_id, a.task_id)
        eq_after = len(set(b.equivalent_ids) & set(a.survivor_ids))
        tot["mutants"] += b.mutants
        tot["killed_before"] += b.killed
        tot["killed_after"] += a.killed
        tot["eq_before"] += len(b.equivalent_ids)
        tot["eq_after"] += eq_after
        if b.survivors:
            per_task.append({"task_id": b.task_id, "mutants": b.mutants, "killed_before": b.killed,
                             "killed_after": a.killed, "eq_before": len(b.equivalent_ids), "eq_after": eq_after,
                             "added": len(aug.added) if aug else 0, "skipped": aug.skipped if aug else ""})
    return per_task, tot


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


if __name__ == "__main__":
    main()
