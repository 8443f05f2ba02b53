"""Data types shared by verification and every consumer of its results.

These are the contract between verifiers, the policy (rewards), prompt evolution
(failure traces) and the lineage (stored as JSON via ``to_dict``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from evolve.util.hashing import content_hash


@dataclass(frozen=True)
class TestCase:
    """One call of the entry point. ``inputs`` are positional args, plain JSON-able values.

    ``expected`` stays in the trusted parent: it is never sent into the sandbox.
    """

    __test__ = False  # not a pytest class

    inputs: tuple
    expected: Any
    # How the parent compares: "eq" (==, exact types when the pipeline says strict), "close"
    # (abs(got - expected) <= tol, or math.isclose when tol is 0), "truthy", "falsy".
    compare: str = "eq"
    tol: float = 0.0


def _test_dict(t: TestCase) -> dict:
    d = {"inputs": list(t.inputs), "expected": t.expected}
    if t.compare != "eq" or t.tol:  # keep the plain form (and its content hash) for plain tests
        d.update(compare=t.compare, tol=t.tol)
    return d


def _test_from(d: dict) -> TestCase:
    return TestCase(tuple(d["inputs"]), d["expected"], d.get("compare", "eq"), float(d.get("tol", 0.0)))


@dataclass(frozen=True)
class Task:
    """A code task. ``prompt`` is what the model is shown (spec, signature, visible examples).

    Hidden tests and ``check_code`` are never shown to the model.
    """

    task_id: str
    prompt: str
    entry_point: str
    visible_tests: tuple[TestCase, ...] = ()
    hidden_tests: tuple[TestCase, ...] = ()
    check_code: str | None = None  # HumanEval `test` source (defines check(candidate))
    canonical_solution: str | None = None  # gold completion of ``prompt`` or a full program
    suite: str = ""
    meta: dict = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["visible_tests"] = [_test_dict(t) for t in self.visible_tests]
        d["hidden_tests"] = [_test_dict(t) for t in self.hidden_tests]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        return cls(
            task_id=d["task_id"], prompt=d["prompt"], entry_point=d["entry_point"],
            visible_tests=tuple(_test_from(t) for t in d.get("visible_tests", ())),
            hidden_tests=tuple(_test_from(t) for t in d.get("hidden_tests", ())),
            check_code=d.get("check_code"), canonical_solution=d.get("canonical_solution"),
            suite=d.get("suite", ""), meta=dict(d.get("meta") or {}),
        )

    @property
    def content_hash(self) -> str:
        return content_hash(self.to_dict())


@dataclass
class TestFailure:
    """One failing check, readable by a human or a reflector."""

    __test__ = False

    stage: str
    error_type: str  # e.g. "WrongAnswer", "ZeroDivisionError", "Timeout", "TypeMismatch"
    message: str = ""
    input_repr: str = ""
    expected_repr: str = ""
    got_repr: str = ""


@dataclass
class StageResult:
    name: str  # "compile", "visible", "hidden", "lint", "perf"
    score: float  # in [0, 1]
    passed: bool
    trace: str = ""  # short, truncated, readable
    error_class: str | None = None
    failures: list[TestFailure] = field(default_factory=list)
    skipped: bool = False
    duration_s: float = 0.0


@dataclass
class VerifyResult:
    """The verdict on one sample. A failed sample is data, not an exception."""

    task_id: str
    reward: float
    passed: bool  # every required stage passed
    stages: list[StageResult] = field(default_factory=list)
    trace: str = ""  # the first failure, readable, truncated
    error_class: str | None = None  # class of the first failure, None when passed
    hack_flags: list[str] = field(default_factory=list)  # e.g. "hack: exit-before-tests"
    weak_verification: bool = False  # checked in-sandbox on plain values, not in the parent
    duration_s: float = 0.0

    @property
    def failures(self) -> list[TestFailure]:
        return [f for s in self.stages for f in s.failures]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> VerifyResult:
        stages = [
            StageResult(**{**s, "failures": [TestFailure(**f) for f in s.get("failures", [])]})
            for s in d.get("stages", [])
        ]
        return cls(**{**d, "stages": stages})
