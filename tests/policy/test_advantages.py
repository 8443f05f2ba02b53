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


# ---- in-group baselines (several prompts share a task's group) -----------------------------------

def ref_in_group(rewards, tasks, prompts, baseline, ref):
    """Slow reference: for each sample, collect by hand the samples sharing its baseline."""
    out = []
    for i in range(len(rewards)):
        if baseline == "per_prompt":
            mates = [j for j in range(len(rewards)) if tasks[j] == tasks[i] and prompts[j] == prompts[i]]
        else:
            mates = [j for j in range(len(rewards)) if tasks[j] == tasks[i]]
        advs = ref([rewards[j] for j in mates])
        out.append(advs[mates.index(i)])
    return out


def _random_batches(seed=0, count=150):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, 25))
        tasks = [f"t{int(x)}" for x in rng.integers(0, 4, n)]
        prompts = [f"p{int(x)}" for x in rng.integers(0, 3, n)]
        rewards = rng.integers(0, 2, n).astype(float) if rng.random() < 0.7 else np.round(rng.random(n) * 4) / 4
        yield rewards, tasks, prompts


@pytest.mark.parametrize("baseline", ["per_prompt", "task"])
@pytest.mark.parametrize("name,ref", [("grpo", ref_grpo), ("dr_grpo", ref_dr_grpo), ("ngrpo", ref_ngrpo)])
def test_in_group_baselines_match_slow_reference(baseline, name, ref):
    from evolve.policy.advantages.baselines import in_group_advantages

    est = get_estimator(name)
    for rewards, tasks, prompts in _random_batches():
        got = in_group_advantages(rewards, tasks, prompts, baseline, est)
        want = ref_in_group(list(rewards), tasks, prompts, baseline, ref)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_task_baseline_rewards_the_better_prompt_and_per_prompt_does_not():
    from evolve.policy.advantages.baselines import in_group_advantages

    # One task: the incumbent passes 1 of 4, the challenger 3 of 4.
    rewards = [1, 0, 0, 0, 1, 1, 1, 0]
    tasks = ["t"] * 8
    prompts = ["inc"] * 4 + ["ch"] * 4
    est = get_estimator("dr_grpo")
    task = in_group_advantages(rewards, tasks, prompts, "task", est)
    per = in_group_advantages(rewards, tasks, prompts, "per_prompt", est)
    assert task[4:].sum() > 0 > task[:4].sum()  # the better prompt's samples gain on average
    assert abs(per[:4].sum()) < 1e-12 and abs(per[4:].sum()) < 1e-12  # each prompt centred on itself


def test_loop_groups_are_the_baseline_partition():
    """The loop builds update groups from rollouts with the same partition as the pure function's
    task baseline (the one the loop uses), so the updater (estimator per group) computes exactly
    ``in_group_advantages``."""
    from evolve.loop.routing import group_by_task
    from evolve.policy.advantages.baselines import in_group_advantages
    from evolve.rollout import Rollout

    est = get_estimator("grpo")
    for rewards, tasks, prompts in _random_batches(seed=3, count=40):
        rolls = [Rollout(task_id=t, group=0, sample_index=i, prompt_version=p, weights_version="w", messages=[],
                         prompt_text="", completion="", reward=float(r))
                 for i, (r, t, p) in enumerate(zip(rewards, tasks, prompts, strict=True))]
        for g in group_by_task(rolls):  # what Updater.assign_advantages does per group
            for r, a in zip(g, est(np.array([x.reward for x in g])), strict=True):
                r.advantage = float(a)
        want = in_group_advantages(rewards, tasks, prompts, "task", est)
        np.testing.assert_allclose([r.advantage for r in rolls], want, atol=1e-12)


def test_unknown_baseline_is_rejected():
    from evolve.policy.advantages.baselines import baseline_partition

    with pytest.raises(ValueError):
        baseline_partition(["t"], ["p"], "global")
