"""Trusted, in-process execution of gym code: reference outputs and exact comparison.

Only for code this package generates (references, teacher solutions) — model
output is checked by the sandboxed ``evolve.verification.Verifier``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Raised:
    """Marks a call that raised; never equal to a value."""

    def __init__(self, exc: BaseException):
        self.name = type(exc).__name__

    def __repr__(self) -> str:
        return f"<raised {self.name}>"


def compile_function(code: str, entry_point: str = "f") -> Callable:
    namespace: dict[str, Any] = {}
    exec(compile(code, "<gym>", "exec"), namespace)  # trusted, generated code only
    return namespace[entry_point]


def call(fn: Callable, inputs: tuple) -> Any:
    try:
        return fn(*[_copy(a) for a in inputs])
    except Exception as e:  # a buggy teacher solution raising is an outcome, not an error
        return Raised(e)


def _copy(v: Any) -> Any:
    return list(v) if isinstance(v, list) else v


def same(a: Any, b: Any) -> bool:
    """Equal with exactly the same types, recursively (3.0 != 3, True != 1)."""
    if isinstance(a, Raised) or isinstance(b, Raised) or type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def passes(code: str, tests, entry_point: str = "f") -> bool:
    """Whether ``code`` returns exactly the expected value on every test (trusted code only)."""
    try:
        fn = compile_function(code, entry_point)
    except Exception:
        return False
    return all(same(call(fn, t.inputs), t.expected) for t in tests)
