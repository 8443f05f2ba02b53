"""Stages 2 and 3: visible and hidden tests, compared here in the trusted parent on plain values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evolve.verification.rewrite import compare
from evolve.verification.sandbox.codec import same_types
from evolve.verification.sandbox_output import Outcome, loaded
from evolve.verification.stages.base import StageContext, call_repr, clip, register, short
from evolve.verification.types import StageResult, TestCase, TestFailure

if TYPE_CHECKING:
    from evolve.verification.pipeline_types import StageConfig


_NO_GOLD = object()


def judge(test: TestCase, got, strict: bool, gold=_NO_GOLD) -> str | None:
    """None when the result passes, else the error class ("WrongAnswer" or "TypeMismatch").

    Strict types hold on every path: a plain ``==`` test needs the expected value's exact types; a
    test through a transform (``sorted(candidate(x)) == [...]``) needs the canonical solution's
    result types on the same call (``gold``), since the transform hides them.
    Values are plain, but a plain value can still break a comparison (``10**400`` against a float
    tolerance overflows, a 64-deep nesting recurses): any such error is a wrong answer, never a crash.
    """
    try:
        if strict and test.compare == "eq" and not same_types(got, test.expected):
            return "TypeMismatch"
        if strict and gold is not _NO_GOLD and not same_types(got, gold):
            return "TypeMismatch"
        return None if compare(test.compare, got, test.expected, test.tol) else "WrongAnswer"
    except Exception:  # noqa: BLE001 - OverflowError, RecursionError, TypeError, MemoryError...
        return "WrongAnswer"


def _expect_text(test: TestCase) -> str:
    if test.compare in ("truthy", "falsy"):
        return "a truthy value" if test.compare == "truthy" else "a falsy value"
    if test.compare in ("close", "isclose"):
        return f"{short(test.expected)} (within {abs(test.tol) or 1e-9:g})"
    if test.compare in ("ne", "isnot"):
        return f"anything but {short(test.expected)}"
    return short(test.expected)


class TestStage:
    __test__ = False

    def __init__(self, which: str):
        self.name = which

    def _tests(self, ctx: StageContext) -> tuple[tuple[TestCase, ...], int]:
        if self.name == "visible":
            return ctx.visible, 0
        return ctx.hidden, len(ctx.visible)

    def applies(self, ctx: StageContext) -> bool:
        return bool(self._tests(ctx)[0]) or (self.name == "hidden" and bool(ctx.weak_reason))

    def run(self, ctx: StageContext, cfg: StageConfig) -> StageResult:
        if self.name == "hidden" and ctx.weak_reason:
            return self._run_weak(ctx)
        tests, offset = self._tests(ctx)
        reply, entry = ctx.reply, ctx.task.entry_point
        failures: list[TestFailure] = []
        first_idx = 0
        for i, test in enumerate(tests):
            out = reply.results[offset + i] if offset + i < len(reply.results) else Outcome("missing")
            f = self._failure(loaded(out), test, entry, ctx, ctx.gold.get(offset + i, _NO_GOLD))
            if f is not None:
                first_idx = first_idx or i + 1
                failures.append(f)
        n, bad = len(tests), len(failures)
        frac = (n - bad) / n
        score = frac if ctx.pipeline.partial_credit else float(bad == 0)
        if not failures:
            return StageResult(self.name, score, True, f"{n}/{n} {self.name} tests passed")
        first = failures[0]
        head = f"{self.name} test {first_idx}/{n} failed: {first.message}"
        trace = clip(f"{head}; {n - bad}/{n} passed" + (f"; stdout: {short(reply.stdout, 120)}" if reply.stdout else ""))
        return StageResult(self.name, score, False, trace, first.error_type, failures)

    def _failure(self, out: Outcome, test: TestCase, entry: str, ctx: StageContext, gold) -> TestFailure | None:
        reply = ctx.reply
        strict = ctx.pipeline.strict_types
        if out.status == "ok" and reply.load_error is None and judge(test, out.value, strict, gold) is None:
            return None  # the common case: no repr of the call needed
        call = call_repr(entry, test.inputs)
        if reply.load_error is not None:
            name, msg, line = reply.load_error
            return TestFailure(self.name, name, f"{name}: {clip(str(msg), 200)} while loading (line {line})", call)
        if out.status == "ok":
            kind = judge(test, out.value, strict, gold)
            if kind is None:
                return None
            got = short(out.value)
            if kind == "TypeMismatch":
                want = type(test.expected if gold is _NO_GOLD else gold).__name__
                got += f" ({type(out.value).__name__}, expected {want})"
            return TestFailure(self.name, kind, f"{call} expected {_expect_text(test)}, got {got}", call,
                               _expect_text(test), got)
        if out.status == "big":
            return TestFailure(self.name, "OutputLimit", f"{call} returned a result over the size limit", call,
                               _expect_text(test), "<too large>")
        if out.status == "np":
            return TestFailure(self.name, "hack", f"{call} returned a non-plain value ({out.error[1]})", call,
                               _expect_text(test), f"<{out.error[1]}>")
        if out.status == "err":
            name, msg, line = out.error
            where = f" (line {line})" if line else ""
            return TestFailure(self.name, name, f"{name}: {clip(str(msg), 200)} at {call}{where}", call,
                               _expect_text(test), name)
        kind = reply.job_error or "Missing"
        return TestFailure(self.name, kind, f"{kind}: {reply.job_message or 'no result'} at {call}", call,
                           _expect_text(test), kind)

    def _run_weak(self, ctx: StageContext) -> StageResult:
        reply = ctx.reply
        if reply.weak_ok:
            return StageResult(self.name, 1.0, True, "the task's check() passed on the candidate's plain results")
        if reply.load_error is not None:
            name, msg, line = reply.load_error
            text = f"{name}: {clip(str(msg), 200)} while loading (line {line})"
        elif reply.weak_error is not None:
            name, msg, line = reply.weak_error
            text = f"{name}: {clip(str(msg), 200)} in check()" + (f" (candidate line {line})" if line else "")
        else:
            name = reply.job_error or "Missing"
            text = f"{name}: {reply.job_message or 'no result'} in check()"
        if name == "AssertionError":
            name = "WrongAnswer"
        trace = clip(f"hidden check failed: {text}")
        return StageResult(self.name, 0.0, False, trace, name, [TestFailure(self.name, name, text)])


register("visible", lambda: TestStage("visible"))
register("hidden", lambda: TestStage("hidden"))
