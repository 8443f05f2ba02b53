"""What reporting held-out under both verifier versions costs (issue 39 item 4), and whether the derived
own-tests verdicts equal a separate run of the original tests.

The loop and `evolve eval` verify every sample once under the augmented tests (the added tests after
the task's own), take a pass there as a pass under the task's own tests, and verify again, on the
original task, only the failures on tasks the version augmented (``passed_before_augmentation``). This
times that second pass against a full second pass over every sample on the original tasks, and counts
disagreements between the two own-tests verdicts.

Samples: per HumanEval task, the gold solution and up to ``--mutants`` of its mutants (plausible wrong
programs; no model samples are cached on this machine). The version is written by ``augment`` first
(seed 0), unless ``--version FILE`` names one with task digests.

    nice -n 10 .venv/bin/python benchmarks/verifier_version_passes.py [--mutants 5] [--version FILE]
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
from verifier_augment import _cpu_model  # noqa: E402


def _version(v, tasks, args) -> Path:
    from evolve.verification.augment import augment, version_doc, write_version

    if args.version:
        return Path(args.version)
    report, augs = augment(v, tasks, seed=0, inputs=args.inputs, max_added=20, max_mutants=20)
    doc = version_doc(v.pipeline, tasks, report, augs, source="humaneval", inputs=args.inputs, max_added=20,
                      max_mutants=20)
    out = REPO / "runs" / "verifier_versions" / "humaneval-digests.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_version(out, doc)


def _samples(tasks, per_task: int) -> list[tuple]:
    from evolve.verification import assemble_program
    from evolve.verification.mutants import mutants
    from evolve.verification.selfcheck import _solution_lines

    out = []
    for t in tasks:
        out.append((t.task_id, t.canonical_solution))
        program = assemble_program(t, t.canonical_solution)
        out += [(t.task_id, m.source) for m in mutants(program, limit=per_task, only_lines=_solution_lines(t, program))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=5, help="mutants a task used as samples")
    ap.add_argument("--inputs", type=int, default=100)
    ap.add_argument("--version", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    from evolve.env.episode import passed_before_augmentation, verify
    from evolve.rollout import Rollout
    from evolve.verification import Verifier, load_humaneval, load_pipeline
    from evolve.verification.augment import versioned_tasks

    tasks = load_humaneval()
    load0 = os.getloadavg()
    with Verifier(load_pipeline(REPO / "verifiers" / "humaneval.toml"), jobs=args.jobs) as v:
        path = _version(v, tasks, args)
        vt = versioned_tasks(path, tasks)
        aug = {t.task_id: vt.tasks.get(t.task_id, t) for t in tasks}
        rolls = [Rollout(tid, 0, i, "", "", [], "", code, purpose="heldout")
                 for i, (tid, code) in enumerate(_samples(tasks, args.mutants))]
        t0 = time.monotonic()
        verify(v, aug, rolls, None)
        t1 = time.monotonic()
        derived, again = passed_before_augmentation(v, vt.originals, rolls)
        t2 = time.monotonic()
        own = {t.task_id: t for t in tasks}
        separate = [r.passed for r in v.verify_batch([(own[r.task_id], r.completion) for r in rolls])]
        t3 = time.monotonic()
        isolation = v.isolation
    differ = [{"task_id": r.task_id, "derived": d, "separate": s} for r, d, s in zip(rolls, derived, separate,
                                                                                      strict=True) if d != s]
    passed_own = sum(separate)
    rejected = sum(1 for r, s in zip(rolls, separate, strict=True) if s and not r.passed)
    figures = {
        "samples": len(rolls), "tasks_augmented": len(vt.originals), "reverified": again,
        "augmented_pass_s": round(t1 - t0, 2), "second_pass_s": round(t2 - t1, 2),
        "full_original_pass_s": round(t3 - t2, 2),
        "second_pass_share_of_a_full_pass": round((t2 - t1) / (t3 - t2), 3) if t3 > t2 else None,
        "derived_vs_separate_disagreements": len(differ),
        "passed_own_tests": passed_own, "of_which_rejected_by_added_tests": rejected,
    }
    machine = machine_facts(isolation=isolation, loadavg_before=[round(x, 2) for x in load0],
                            loadavg_after=[round(x, 2) for x in os.getloadavg()], nice=os.nice(0), cpu=_cpu_model(),
                            quiet=False)
    write_results("verifier_version_passes", args=vars(args), figures=figures, machine=machine,
                  results={"version": vt.record, "disagreements": differ})
    print_figures(figures)


if __name__ == "__main__":
    main()
