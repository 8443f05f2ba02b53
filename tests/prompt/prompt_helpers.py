"""Builders for verified rollouts (real VerifyResult objects, as the verifier returns them)."""

from __future__ import annotations

from evolve.rollout import Rollout
from evolve.verification.types import StageResult, TestFailure, VerifyResult


def rollout(task_id: str, passed: bool, error_type: str = "WrongAnswer", input_repr: str = "([1, 2],)",
            expected: str = "3", got: str = "2", message: str = "", completion: str = "def f(xs):\n    return 0\n",
            prompt: str = "Write f(xs).", sample_index: int = 0) -> Rollout:
    failures = [] if passed else [TestFailure("hidden", error_type, message, input_repr, expected, got)]
    stage = StageResult("hidden", 1.0 if passed else 0.0, passed, "" if passed else f"{error_type}: {message}",
                        None if passed else error_type, failures)
    res = VerifyResult(task_id, 1.0 if passed else 0.0, passed, [stage], stage.trace,
                       None if passed else error_type)
    return Rollout(task_id, 0, sample_index, "p", "w", [{"role": "user", "content": prompt}], prompt,
                   completion, res, res.reward)


def empty_failure(task_id: str, i: int = 0) -> Rollout:
    return rollout(task_id, False, "ValueError", "([],)", "0", "", "max() arg is an empty sequence",
                   sample_index=i)


def div_failure(task_id: str, i: int = 0) -> Rollout:
    return rollout(task_id, False, "WrongAnswer", "([3, 4],)", "3", "3.5", sample_index=i)
