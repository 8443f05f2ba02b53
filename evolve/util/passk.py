"""pass@k with the unbiased estimator of Chen et al. (2021)."""

from __future__ import annotations

from collections.abc import Iterable
from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k): the chance that k of n samples (c correct) include a correct one."""
    if n <= 0 or k <= 0:
        raise ValueError("n and k must be positive")
    if k > n:
        raise ValueError(f"k={k} exceeds the number of samples n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean over tasks of pass@k; ``counts`` yields (n, c) per task."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    return sum(values) / len(values) if values else 0.0
