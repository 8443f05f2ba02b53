"""The task factory: pinned sdist -> injected bugs -> verified FAIL_TO_PASS / PASS_TO_PASS tasks.

Per package: the pristine suite runs once (the tests that pass are the only ones ever selected);
candidates (every single-site injection of the listed source files) are shuffled by the seed and
tried in that order until ``per_package`` are kept or ``max_tries`` are spent. A candidate is kept
only when, run for real in the sandbox, some pristine-passing tests fail on the buggy tree
(FAIL_TO_PASS, at most ``max_f2p``) and the chosen PASS_TO_PASS selection still passes; the exact
selection is then run again on both trees (F2P fail + P2P pass on the buggy one, all pass on the
pristine one) before it is written. The problem statement is the failing tests' names and their
assertion output, never the diff (a pristine line quoted by a traceback is cut out).
Departure from SWE-smith: bugs are single AST sites, not LM-rewritten functions (offline, cheap).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from evolve.repo.inject import Injection, injections
from evolve.repo.packages import PackageSpec, prepare
from evolve.repo.runner import RunResult, run_tests
from evolve.verification.types import Task

SUITE = "repo-fix"
MAX_OUTPUT = 1500


@dataclass
class BuildParams:
    seed: int = 0
    per_package: int = 6
    max_tries: int = 30
    max_f2p: int = 20
    max_p2p: int = 30


@dataclass
class PackageReport:
    package: str
    split: str
    tried: int = 0
    kept: int = 0
    baseline_passed: int = 0
    verify_s: list[float] = field(default_factory=list)
    verify_cpu_s: list[float] = field(default_factory=list)  # the kept tasks' sandboxed runs, CPU (wait4)
    error: str | None = None


def sandbox_paths(spec: PackageSpec) -> list[str]:
    return [str(Path("/repo") / p) if p != "." else "/repo" for p in spec.python_path]


def buggy_copy(pristine: Path, rel: str, source: str, dest: Path) -> Path:
    shutil.copytree(pristine, dest)
    (dest / rel).write_text(source, encoding="utf-8")
    return dest


def _fix_lines(diff: str) -> list[str]:
    """The pristine lines the bug replaced: what guidance must never quote (the leakage audit's list)."""
    return [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")
            and len(ln[1:].strip()) >= 6]


def statement(spec: PackageSpec, f2p: list[str], res: RunResult, diff: str) -> str:
    """What a user would report: which tests fail and how (never the fix)."""
    removed = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    removed = [r for r in removed if len(r) >= 4]
    shown = []
    for nid in f2p[:3]:
        text = "\n".join(ln for ln in res.failures.get(nid, "").splitlines()
                         if not any(r in ln for r in removed))
        shown.append(f"{nid}\n{text[-MAX_OUTPUT // 2:]}")
    names = "\n".join(f"- {n}" for n in f2p[:10]) + (f"\n- ... and {len(f2p) - 10} more" if len(f2p) > 10 else "")
    return (f"Bug report for {spec.name} {spec.version}: these tests fail.\n{names}\n\n"
            "Test output:\n" + "\n\n".join(shown)[:MAX_OUTPUT] +
            "\n\nFind the bug in the package source and fix it (the tests are correct).")


def _try(spec: PackageSpec, pristine: Path, inj: Injection, passing: set[str], params: BuildParams,
         rng: random.Random) -> tuple[Task | None, float, float]:
    t0 = time.monotonic()
    paths = sandbox_paths(spec)
    with tempfile.TemporaryDirectory(prefix="evolve-repo-bug-") as tmp:
        work = buggy_copy(pristine, inj.file, inj.source, Path(tmp) / "w")
        bug = (inj.file, inj.source.encode("utf-8"))
        first = run_tests(pristine, work, spec.tests, paths, bug=bug)
        if not first.complete:
            return None, time.monotonic() - t0, 0.0
        f2p = sorted(n for n in passing if not first.passed(n))
        if not f2p or len(f2p) > params.max_f2p:
            return None, time.monotonic() - t0, 0.0
        rest = sorted(n for n in passing if first.passed(n))
        near = [n for n in rest if n.split("::")[0] in {f.split("::")[0] for f in f2p}]
        p2p = sorted(rng.sample(near, min(len(near), params.max_p2p)))
        if not p2p:
            return None, time.monotonic() - t0, 0.0
        again = run_tests(pristine, work, f2p + p2p, paths, bug=bug)
    clean = run_tests(pristine, None, f2p + p2p, paths)
    cpu = first.cpu_s + again.cpu_s + clean.cpu_s
    ok = (again.complete and clean.complete and not any(again.passed(n) for n in f2p)
          and all(again.passed(n) for n in p2p) and all(clean.passed(n) for n in f2p + p2p))
    if not ok:
        return None, time.monotonic() - t0, 0.0
    diff = inj.diff((pristine / inj.file).read_text(encoding="utf-8"))
    meta = {"package": spec.name, "version": spec.version, "sha256": spec.sha256, "split": spec.split,
            "python_path": spec.python_path, "file": inj.file, "function": inj.function,
            "operator": inj.operator, "line": inj.line, "buggy_source": inj.source, "diff": diff,
            "leak_fragments": _fix_lines(diff), "fail_to_pass": f2p, "pass_to_pass": p2p,
            "verify_s": round(time.monotonic() - t0, 3)}
    task = Task(task_id="", prompt=statement(spec, f2p, first, diff), entry_point="submit", suite=SUITE, meta=meta)
    return task, time.monotonic() - t0, cpu


def build_package(spec: PackageSpec, cache: Path, params: BuildParams, offline: bool = False,
                  ) -> tuple[list[Task], PackageReport]:
    rep = PackageReport(spec.key, spec.split)
    pristine = prepare(spec, cache, offline)
    base = run_tests(pristine, None, spec.tests, sandbox_paths(spec))
    passing = {n for n, o in base.outcomes.items() if o == "passed"} if base.complete else set()
    rep.baseline_passed = len(passing)
    if not passing:
        rep.error = f"the pristine suite did not run: {base.output[-300:]}"
        return [], rep
    cands = [i for rel in spec.source for i in injections(rel, (pristine / rel).read_text(encoding="utf-8"))]
    rng = random.Random(f"{params.seed}/{spec.key}")
    rng.shuffle(cands)
    tasks: list[Task] = []
    for inj in cands[:params.max_tries]:
        if len(tasks) >= params.per_package:
            break
        rep.tried += 1
        task, secs, cpu = _try(spec, pristine, inj, passing, params, rng)
        if task is not None:
            tasks.append(_with_id(task, f"repo/{spec.name}/{len(tasks):02d}"))
            rep.verify_s.append(round(secs, 3))
            rep.verify_cpu_s.append(round(cpu, 3))
    rep.kept = len(tasks)
    return tasks, rep


def _with_id(task: Task, task_id: str) -> Task:
    return Task(task_id, task.prompt, task.entry_point, suite=task.suite, meta=task.meta)


def build(specs: list[PackageSpec], out: Path, params: BuildParams, offline: bool = False,
          progress=None) -> dict:
    """Build every package's tasks into ``out/tasks.jsonl`` and return the report (also ``out/report.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    all_tasks, reports = [], []
    load0, t0 = [round(x, 2) for x in os.getloadavg()], time.monotonic()
    for spec in specs:
        tasks, rep = build_package(spec, out / "cache", params, offline)
        all_tasks += tasks
        reports.append(rep)
        if progress:
            progress(rep)
    with open(out / "tasks.jsonl", "w", encoding="utf-8") as f:
        for t in all_tasks:
            f.write(json.dumps(t.to_dict(), sort_keys=True) + "\n")
    report = {"seed": params.seed, "params": params.__dict__, "tasks": len(all_tasks),
              "build_seconds": round(time.monotonic() - t0, 1), "loadavg_start": load0,
              "loadavg_end": [round(x, 2) for x in os.getloadavg()], "packages": [r.__dict__ for r in reports]}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    return report


def load_repo_tasks(path: Path) -> list[Task]:
    from evolve.errors import ConfigError

    if not path.is_file():
        raise ConfigError(f"repo tasks not found: {path} (build them: evolve repo-tasks build)")
    return [Task.from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
