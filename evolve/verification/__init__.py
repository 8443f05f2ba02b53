"""Verification: run model-written code against tests in a sandbox, compare in the trusted parent.

    from evolve.verification import Verifier, load_pipeline, load_tasks
    with Verifier(load_pipeline("verifiers/default.toml"), jobs=2) as v:
        results = v.verify_batch([(task, completion), ...])
"""

from evolve.verification.pipeline import Pipeline, StageConfig, load_pipeline
from evolve.verification.tasks import Sample, assemble_program, load_humaneval, load_samples, load_tasks
from evolve.verification.types import StageResult, Task, TestCase, TestFailure, VerifyResult
from evolve.verification.verifier import Verifier

__all__ = ["Pipeline", "Sample", "StageConfig", "StageResult", "Task", "TestCase", "TestFailure", "Verifier",
           "VerifyResult", "assemble_program", "load_humaneval", "load_pipeline", "load_samples", "load_tasks"]
