"""The gate's promotion rule: a proposal replaces its parent only when it *beats* it on the
validation tasks, never on a tie.

Both are evaluated on the same validation tasks with the same seed on the same weights, so each
task gives one paired difference d = proposal's mean score - parent's. The mean difference must
exceed ``gate_margin`` *and* an exact one-sided paired sign-flip (permutation) test of H0 "d - margin
is symmetric about 0" must reject at level ``gate_alpha``. The p-value is the share of the 2^n sign
patterns of |d - margin| whose sum is at least the observed sum (equality counts against the
proposal), so under H0 P(p <= alpha) <= alpha exactly: **a line that changes nothing passes
validation with probability at most ``gate_alpha``** (the minibatch gate before it only lowers
that). All-zero differences (a tie) give p = 1. (The "strict" rule, mean difference > margin alone,
was deleted: a line that changes nothing won about half of the non-tied draws.)

Assumption, written down: under H0 each task's difference is symmetric about the margin given its
magnitude (true for a line that changes nothing: the two prompts' samples are exchangeable).
Departure from GEPA: GEPA keeps every minibatch winner in its pool and the best mean validation
score is the current prompt, so one extra success out of 64 samples switches prompts; here the
parent stays unless the test says otherwise. Pure functions: no torch, no policy.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

EXACT_MAX = 16  # 2^16 sign patterns are enumerated exactly; beyond, a seeded Monte Carlo estimate
_MC_DRAWS = 20000


def paired_diffs(proposal: dict[str, float], parent: dict[str, float]) -> list[float]:
    """Per shared task (sorted by id): proposal's score - parent's."""
    return [proposal[t] - parent[t] for t in sorted(set(proposal) & set(parent))]


def signflip_pvalue(diffs, margin: float = 0.0) -> float:
    """One-sided p-value of the paired sign-flip test of H0 "d - margin symmetric about 0"
    against "mean d > margin" (exact up to ``EXACT_MAX`` tasks)."""
    d = np.asarray(diffs, dtype=np.float64) - margin
    if d.size == 0:
        return 1.0
    observed = d.sum() - 1e-12  # float slack: a pattern with the same sum counts against the proposal
    mag = np.abs(d[d != 0])  # a zero difference is the same under either sign
    if mag.size == 0:
        return 1.0
    hits = _signs(mag.size) @ mag >= observed
    if mag.size <= EXACT_MAX:
        return float(np.mean(hits))
    return float((1 + hits.sum()) / (1 + hits.size))  # Monte Carlo: the estimate that stays valid


def _signs(n: int) -> np.ndarray:
    """Every sign pattern of n tasks (exact), or beyond ``EXACT_MAX`` a seeded Monte Carlo sample
    (so a decision replays identically)."""
    return _exact_signs(n) if n <= EXACT_MAX else _mc_signs(n).astype(np.float64)


@functools.lru_cache(maxsize=EXACT_MAX + 1)
def _exact_signs(n: int) -> np.ndarray:
    return np.array(list(itertools.product((1.0, -1.0), repeat=n)))


@functools.lru_cache(maxsize=32)  # 20000 x n bytes each (int8: 1 MB at n = 48); redrawn (seeded) past 32
def _mc_signs(n: int) -> np.ndarray:
    # The same draws as choice((1.0, -1.0)), kept as int8 so that more sizes stay cached: a trial's
    # n (its non-zero differences) changes at every look, and redrawing cost as much as the test.
    return np.random.default_rng(0).choice(np.array((1, -1), dtype=np.int8), size=(_MC_DRAWS, n))


def gate_passes(proposal: dict[str, float], parent: dict[str, float], alpha: float = 0.2,
                margin: float = 0.0) -> tuple[bool, dict]:
    """Whether the proposal beats its parent on validation, and the evidence (for the lineage)."""
    d = paired_diffs(proposal, parent)
    mean = float(np.mean(d)) if d else 0.0
    p = signflip_pvalue(d, margin)
    ok = bool(d) and mean > margin and p <= alpha
    return ok, {"rule": "signflip", "n": len(d), "mean_diff": round(mean, 4), "p": round(p, 4), "passed": ok}
