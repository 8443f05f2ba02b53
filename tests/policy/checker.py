"""A trusted in-process checker for tests only (the real one is evolve.verification.Verifier).

It runs only canonical solutions and deliberate wrong answers written by the tests themselves,
so no sandbox is needed; used until/unless the sandboxed Verifier is importable.
"""

from __future__ import annotations

from evolve.verification.types import VerifyResult


class TrustedChecker:
    def verify_batch(self, pairs):
        return [self._one(task, code) for task, code in pairs]

    def _one(self, task, code) -> VerifyResult:
        env: dict = {}
        try:
            exec(compile(code, "<completion>", "exec"), env)  # noqa: S102 - trusted test inputs only
            fn = env[task.entry_point]
            for case in task.hidden_tests:
                got = fn(*[list(a) if isinstance(a, list) else a for a in case.inputs])
                if got != case.expected or type(got) is not type(case.expected):
                    return VerifyResult(task.task_id, 0.0, False, error_class="WrongAnswer")
        except Exception as e:  # a failed sample is data
            return VerifyResult(task.task_id, 0.0, False, error_class=type(e).__name__)
        return VerifyResult(task.task_id, 1.0, True)


def make_verifier(jobs: int = 2):
    """The real sandboxed Verifier when it exists, else the trusted checker (a context manager either way)."""
    try:
        from evolve.verification import Verifier
    except ImportError:
        from contextlib import nullcontext

        return nullcontext(TrustedChecker())
    return Verifier(None, jobs=jobs)
