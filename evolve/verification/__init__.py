"""Verification: run model-written code against tests in a sandbox."""

from evolve.verification.types import StageResult, Task, TestCase, TestFailure, VerifyResult

__all__ = ["StageResult", "Task", "TestCase", "TestFailure", "VerifyResult"]
