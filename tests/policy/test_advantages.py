"""Each estimator against a slow, loop-based reference written from the papers' formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evolve.errors import ConfigError
from evolve.policy.advantages import get_estimator


def _mean(xs):
    return sum(xs) / len(xs)


def _std_unbiased(xs):
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def ref_grpo(rs, eps=1e-6, scale=True):
    if len(rs) == 1:
        return [rs[0]]
    m = _mean(rs)
    s = _std_unbiased(rs)
    return [(r - m) / (s + eps) if scale else r - m for r in rs]


def ref_dr_grpo(rs):
    if len(rs) == 1:
        return [rs[0]]
    m = _mean(rs)
    return [r - m for r in rs]


def ref_ngrpo(rs, r_max=1.0, m=1, eps=1e-6):
    aug = list(rs) + [r_max] * m
    mu, s = _mean(aug), _std_unbiased(aug)
    return [(r - mu) / (s + eps) for r in rs]


def _random_groups(seed=0, count=300):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        g = int(rng.integers(1, 17))
        kind = rng.integers(0, 3)
        if kind == 0:
            yield rng.integers(0, 2, g).astype(float)  # 0/1 rewards, often zero-variance
        elif kind == 1:
            yield rng.random(g)
        else:
            yield np.round(rng.random(g) * 4) / 4  # partial-credit rewards with ties


@pytest.mark.parametrize("name,params,ref", [
    ("grpo", {}, ref_grpo),
    ("grpo", {"scale": False}, lambda r: ref_grpo(r, scale=False)),
    ("dr_grpo", {}, ref_dr_grpo),
    ("ngrpo", {}, ref_ngrpo),
    ("ngrpo", {"m": 3, "r_max": 2.0}, lambda r: ref_ngrpo(r, 2.0, 3)),
])
def test_matches_slow_reference(name, params, ref):
    est = get_estimator(name, **params)
    for rewards in _random_groups():
        got = est(rewards)
        want = ref(list(rewards))
        assert got.shape == rewards.shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_known_values():
    grpo = get_estimator("grpo")
    np.testing.assert_allclose(grpo(np.zeros(8)), np.zeros(8))  # zero variance: no signal
    ng = get_estimator("ngrpo")
    np.testing.assert_allclose(ng(np.zeros(8)), np.full(8, -1 / 3), rtol=1e-5)  # field notes: -1/3
    np.testing.assert_allclose(ng(np.ones(8)), np.zeros(8), atol=1e-12)  # all-correct: still 0
    np.testing.assert_allclose(grpo(np.array([0.7])), [0.7])  # size-1 group: mean 0, std 1 (verl)


def test_unknown_estimator():
    with pytest.raises(ConfigError, match="unknown advantage estimator"):
        get_estimator("ppo")
