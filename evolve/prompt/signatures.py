"""Failure signatures: what a failed sample looks like, as a small set of features.

A signature is (error type, shape of the failing input, message keywords). The
offline reflector groups failures by it and retrieves lessons whose tags overlap it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from evolve.rollout import Rollout
from evolve.verification.types import TestFailure

_WORD = re.compile(r"[a-z_]{4,}")
_STOP = frozenset("""
this that with from have were when what which their there your none true false line file
self return value values expected error got call called argument arguments object type
""".split())


@dataclass(frozen=True)
class Signature:
    """A hashable failure signature; ``features`` is what lessons are matched against."""

    error_type: str
    shape: tuple[str, ...]
    keywords: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.error_type}|{','.join(self.shape) or '-'}|{','.join(self.keywords[:3]) or '-'}"

    @property
    def features(self) -> frozenset[str]:
        return frozenset({self.error_type.lower(), *self.shape, *self.keywords})


@dataclass
class SignatureGroup:
    signature: Signature
    count: int = 0
    task_ids: list[str] = field(default_factory=list)


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _walk_shape(value, out: set[str], depth: int = 0) -> None:
    if depth > 3:
        return
    if isinstance(value, bool):
        out.add("bool")
    elif isinstance(value, int):
        if value == 0:
            out.add("zero")
        elif value < 0:
            out.add("negative")
    elif isinstance(value, float):
        out.add("float")
    elif isinstance(value, str):
        out.add("empty" if not value else "string")
    elif isinstance(value, (list, tuple, dict, set)):
        if not value:
            out.add("empty")
        elif len(value) == 1:
            out.add("single")
        for v in list(value)[:50]:
            _walk_shape(v, out, depth + 1)
    elif value is None:
        out.add("none")


def input_shape(input_repr: str) -> set[str]:
    """Coarse shape features of a failing input: empty, single, negative, zero, float, string, none."""
    out: set[str] = set()
    value = _literal(input_repr.strip()) if input_repr else None
    if isinstance(value, tuple):  # the positional-argument tuple itself is not a shape
        for v in value:
            _walk_shape(v, out)
    elif value is not None:
        _walk_shape(value, out)
    elif input_repr:
        if "[]" in input_repr or "''" in input_repr or '""' in input_repr:
            out.add("empty")
        if re.search(r"(?<![\w)])-\d", input_repr):
            out.add("negative")
    return out


def output_shape(expected_repr: str, got_repr: str) -> set[str]:
    """Type mismatches between expected and produced values (e.g. float for int: a `/` for `//` bug)."""
    exp, got = _literal(expected_repr), _literal(got_repr)
    out: set[str] = set()
    if exp is None or got is None:
        if got_repr.strip() == "None" and expected_repr.strip() not in ("", "None"):
            out.add("returned-none")
        return out
    if type(exp) is not type(got):
        out.add(f"got-{type(got).__name__}-for-{type(exp).__name__}")
        if isinstance(exp, int) and isinstance(got, float):
            out.add("division")
    elif isinstance(exp, (int, float)) and isinstance(got, (int, float)) and exp != got:
        out.add("off-by-one" if abs(exp - got) == 1 else "wrong-number")
    return out


def keywords(message: str, limit: int = 4) -> tuple[str, ...]:
    words = [w for w in _WORD.findall(message.lower()) if w not in _STOP]
    return tuple(dict.fromkeys(words))[:limit]


def failure_signature(failure: TestFailure) -> Signature:
    shape = input_shape(failure.input_repr) | output_shape(failure.expected_repr, failure.got_repr)
    return Signature(failure.error_type or "Error", tuple(sorted(shape)), keywords(failure.message))


def rollout_signature(rollout: Rollout) -> Signature | None:
    """The signature of a failed rollout (its first failure), None when it passed."""
    res = rollout.result
    if res is None:
        return Signature("NotVerified", (), ())
    if res.passed:
        return None
    failures = res.failures
    if failures:
        return failure_signature(failures[0])
    # No structured failure (compile error, timeout, hack flag): fall back to the class and trace.
    error = res.error_class or (res.hack_flags[0].split(":")[0] if res.hack_flags else "Error")
    extra = ("truncated",) if rollout.truncated else ()
    return Signature(error, extra, keywords(res.trace))


def group_failures(rollouts: list[Rollout]) -> list[SignatureGroup]:
    """Failures grouped by signature, most frequent first (ties: signature key, for determinism)."""
    groups: dict[Signature, SignatureGroup] = {}
    for r in rollouts:
        sig = rollout_signature(r)
        if sig is None:
            continue
        g = groups.setdefault(sig, SignatureGroup(sig))
        g.count += 1
        if r.task_id not in g.task_ids:
            g.task_ids.append(r.task_id)
    return sorted(groups.values(), key=lambda g: (-g.count, g.signature.key))

