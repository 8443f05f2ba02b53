"""Input contracts: the preconditions a task's docstring states, written once, per task.

A generated input that breaks one is not a test (a correct solution may do anything there: loop,
raise, or answer differently from the reference) and is no evidence that a mutant differs from the
gold solution. EvalPlus wrote such contracts by hand for 83 of HumanEval's 164 tasks; these are the
HumanEval tasks whose tests let non-equivalent mutants through, where the docstring states a
precondition. A contract is a predicate over the call's arguments, run in the trusted parent on
inputs the parent generated (never on candidate output). Every task's own test inputs must satisfy
its contract (``tests/verification/test_augment.py`` checks all of HumanEval's): HumanEval/75 has none
although its docstring says "(a) is less then 100", because its own tests call it with 105, 125 and 126.
"""

from __future__ import annotations

from collections.abc import Callable

from evolve.verification.types import Task


def _prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def _groups(s: str) -> bool:
    """Space-separated groups of balanced parentheses (HumanEval/6)."""
    if not s.strip() or set(s) - set("() "):
        return False
    for g in s.split():
        depth = 0
        for c in g:
            depth += 1 if c == "(" else -1
            if depth < 0:
                return False
        if depth:
            return False
    return True


def _closest_pair_unique(xs: list) -> bool:
    """One closest pair by value (HumanEval/20 names no tie-break: on [1, 2, 3, 4, 5, 0] every adjacent gap
    ties, the reference returns (1, 2) and (0, 1) is as right). Near-ties within float noise count as ties."""
    s = sorted(xs)
    gaps = [(b - a, a, b) for a, b in zip(s, s[1:], strict=False)]
    low = min(g for g, _, _ in gaps)
    return len({(a, b) for g, a, b in gaps if g <= low + 1e-9 * max(1.0, abs(low))}) == 1


def _number_text(v: str) -> bool:
    """A string that is a finite decimal number, as written ("15.3", "-0.5"; not "nan", not " 1")."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return False
    return v == v.strip() and x == x and abs(x) != float("inf") and all(c in "+-.0123456789" for c in v)


def _grid(grid: list, k: int) -> bool:
    """An N x N grid (N >= 2) of values in 1..N*N, and k >= 1 (HumanEval/129). The docstring says each
    value appears once, but one of the task's own tests repeats a value, so that part is not required."""
    n = len(grid)
    return (n >= 2 and all(type(r) is list and len(r) == n for r in grid)
            and all(type(x) is int and 1 <= x <= n * n for r in grid for x in r) and type(k) is int and k >= 1)


HUMANEVAL: dict[str, Callable[..., bool]] = {
    "HumanEval/4": lambda xs: len(xs) >= 1,  # the mean of an empty list is undefined
    "HumanEval/6": _groups,  # "a string represented multiple groups for nested parentheses separated by spaces"
    "HumanEval/18": lambda s, sub: sub != "",  # counting an empty substring is undefined
    "HumanEval/20": lambda xs: len(xs) >= 2 and _closest_pair_unique(xs),  # "of length at least two"
    "HumanEval/25": lambda n: n >= 1,  # "the product of all factors"
    "HumanEval/35": lambda xs: len(xs) >= 1,  # the maximum of an empty list is undefined
    "HumanEval/39": lambda n: 1 <= n <= 11,  # "n-th" (>= 1); <= 11 is ours: the reference cannot reach the 12th
    "HumanEval/46": lambda n: n >= 0,  # the n-th element
    "HumanEval/59": lambda n: n > 1 and not _prime(n),  # "Assume n > 1 and is not a prime"
    "HumanEval/68": lambda arr: all(x >= 0 for x in arr),  # "non-negative integer nodes"
    "HumanEval/81": lambda grades: all(0.0 <= g <= 4.0 for g in grades),  # the GPA table's range
    "HumanEval/94": lambda lst: any(_prime(x) for x in lst),  # "find the largest prime value"
    "HumanEval/99": _number_text,  # "a value (string) representing a number"
    "HumanEval/114": lambda nums: len(nums) >= 1,  # a non-empty sub-array of nums
    "HumanEval/118": lambda w: all(c.isascii() and c.isalpha() for c in w),  # "English letter only"
    "HumanEval/126": lambda xs: all(type(x) is int and x >= 0 for x in xs),  # "no negative numbers, only integers"
    "HumanEval/127": lambda a, b: a[0] <= a[1] and b[0] <= b[1],  # "start is less or equal its end"
    "HumanEval/129": _grid,
    "HumanEval/135": lambda arr: len(set(arr)) == len(arr),  # "will not contain duplicate values"
    "HumanEval/163": lambda a, b: a > 0 and b > 0,  # "two positive integers"
}


def contract_for(task: Task) -> Callable[..., bool] | None:
    return HUMANEVAL.get(task.task_id) if task.task_id.startswith("HumanEval/") else None


def admits(contract: Callable[..., bool] | None, args: tuple) -> bool:
    """Whether ``args`` satisfy the contract (no contract: always; a contract that raises: no)."""
    if contract is None:
        return True
    try:
        return bool(contract(*args))
    except Exception:  # noqa: BLE001 - a value of another shape than the contract expects breaks it
        return False
