"""GiGPO against a slow reference written from the paper's equations (arXiv 2505.10978, Eqs. 3-8)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_advantages import ref_dr_grpo, ref_grpo

from evolve.policy.advantages import get_estimator
from evolve.policy.advantages.gigpo import gigpo_advantages, trajectory_steps
from evolve.policy.turns import assign_group
from evolve.rollout import Rollout, Turn


def ref_gigpo(episode_rewards, step_rewards, anchors, omega, gamma, scale, eps=1e-6):
    """Loop by loop: A^E by the grpo formula, returns by explicit sums, step groups by scanning every step."""
    ep = ref_grpo(list(episode_rewards), eps=eps, scale=scale)
    returns = [[sum(gamma ** (k - t) * rs[k] for k in range(t, len(rs))) for t in range(len(rs))]
               for rs in step_rewards]
    out = []
    for i, traj in enumerate(anchors):
        row = []
        for t, anchor in enumerate(traj):
            if anchor is None:
                mates = [(i, t)]
            else:
                mates = [(j, u) for j, tj in enumerate(anchors) for u, a in enumerate(tj) if a == anchor]
            vals = [returns[j][u] for j, u in mates]
            if len(vals) == 1:
                a_s = 0.0
            else:
                mu = sum(vals) / len(vals)
                sd = math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1))
                a_s = (returns[i][t] - mu) / (sd + eps) if scale else returns[i][t] - mu
            row.append(ep[i] + omega * a_s)
        out.append(row)
    return ep, out


def _random_group(rng):
    """G trajectories of 1-4 policy steps; step 0 shares the task's start state, later states repeat often."""
    g = int(rng.integers(1, 9))
    anchors, turn_rewards, episode = [], [], []
    for _ in range(g):
        n = int(rng.integers(1, 5))
        states = ["start"] + [None if rng.random() < 0.15 else f"s{int(rng.integers(0, 3))}" for _ in range(n - 1)]
        anchors.append(states)
        turn_rewards.append([None if rng.random() < 0.2 else float(np.round(rng.random() * 4) / 4) for _ in range(n)])
        episode.append(float(rng.integers(0, 2)) if rng.random() < 0.7 else float(rng.random()))
    return episode, turn_rewards, anchors


@pytest.mark.parametrize("omega,gamma,scale,mode", [
    (1.0, 0.95, True, "final"), (1.0, 0.95, False, "final"), (0.5, 0.7, True, "dense"), (2.0, 1.0, False, "dense"),
])
def test_matches_slow_reference_on_random_groups(omega, gamma, scale, mode):
    rng = np.random.default_rng(5)
    est = get_estimator("gigpo", omega=omega, gamma=gamma, scale=scale, step_rewards=mode)
    shared = 0
    for _ in range(300):
        episode, turn_rewards, anchors = _random_group(rng)
        steps = [trajectory_steps(R, tr, mode) for R, tr in zip(episode, turn_rewards, strict=True)]
        want_ep, want = ref_gigpo(episode, steps, anchors, omega, gamma, scale)
        got_ep, got = est.turn_advantages(episode, turn_rewards, anchors)
        np.testing.assert_allclose(got_ep, want_ep, rtol=1e-9, atol=1e-9)
        for g_row, w_row in zip(got, want, strict=True):
            np.testing.assert_allclose(g_row, w_row, rtol=1e-9, atol=1e-9)
        flat = [a for tr in anchors for a in tr[1:] if a is not None]
        shared += len(flat) > len(set(flat))
    assert shared > 50  # the random groups really exercise shared anchor states beyond the start


def test_step_rewards_modes():
    assert trajectory_steps(1.0, [0.5, None, 0.25], "final") == [0.0, 0.0, 1.0]
    assert trajectory_steps(1.0, [0.5, None, 0.25], "dense") == [0.5, 0.0, 1.0]
    assert trajectory_steps(0.0, [], "dense") == []
    with pytest.raises(ValueError):
        trajectory_steps(1.0, [0.1], "sparse")


def test_hand_computed_example():
    """A and B reach the same state s1 after turn 1; C solves the task at turn 1 (gamma 0.5, no std).

    A^E = R - 2/3.  Step returns: A [0.5, 1], B [0, 0], C [1].  Group start {0.5, 0, 1} (mean 0.5),
    group s1 {1, 0} (mean 0.5).
    """
    ep, steps = gigpo_advantages([1, 0, 1], [[0, 1], [0, 0], [1]], [["s0", "s1"], ["s0", "s1"], ["s0"]],
                                 omega=1.0, gamma=0.5, scale=False)
    np.testing.assert_allclose(ep, [1 / 3, -2 / 3, 1 / 3])
    np.testing.assert_allclose(steps[0], [1 / 3 + 0.0, 1 / 3 + 0.5])
    np.testing.assert_allclose(steps[1], [-2 / 3 - 0.5, -2 / 3 - 0.5])
    np.testing.assert_allclose(steps[2], [1 / 3 + 0.5])


def _single_turn(rewards):
    return [Rollout(task_id="t", group=0, sample_index=i, prompt_version="p", weights_version="w", messages=[],
                    prompt_text="", completion="", reward=float(r)) for i, r in enumerate(rewards)]


@pytest.mark.parametrize("scale,ref", [(True, ref_grpo), (False, ref_dr_grpo)])
def test_single_turn_reduces_to_the_episode_level(scale, ref):
    rng = np.random.default_rng(1)
    est = get_estimator("gigpo", scale=scale, omega=3.0, gamma=0.5)
    for _ in range(100):
        rewards = rng.integers(0, 2, int(rng.integers(1, 9))).astype(float)
        group = _single_turn(rewards)
        assign_group(group, est)
        np.testing.assert_allclose([r.advantage for r in group], ref(list(rewards)), rtol=1e-12, atol=1e-12)
        ep, steps = est.turn_advantages(rewards, [[] for _ in rewards], [[] for _ in rewards])
        np.testing.assert_allclose(ep, ref(list(rewards)), rtol=1e-12, atol=1e-12)
        assert all(s.size == 0 for s in steps)


def test_assign_group_sets_turn_advantages_from_rollouts():
    rng = np.random.default_rng(9)
    est = get_estimator("gigpo", gamma=0.9, step_rewards="dense")
    for _ in range(50):
        episode, turn_rewards, anchors = _random_group(rng)
        group = _single_turn(episode)
        for r, tr, an in zip(group, turn_rewards, anchors, strict=True):
            for k, (rew, h) in enumerate(zip(tr, an, strict=True)):
                r.turns.append(Turn("assistant", f"code {k}", reward=rew, observation_hash=h))
                r.turns.append(Turn("user", "feedback"))  # environment turns get no advantage
        assign_group(group, est)
        steps = [trajectory_steps(R, tr, "dense") for R, tr in zip(episode, turn_rewards, strict=True)]
        want_ep, want = ref_gigpo(episode, steps, anchors, 1.0, 0.9, True)
        np.testing.assert_allclose([r.advantage for r in group], want_ep, rtol=1e-9, atol=1e-9)
        for r, w in zip(group, want, strict=True):
            np.testing.assert_allclose([t.advantage for t in r.turns if t.role == "assistant"], w, rtol=1e-9)
            assert all(t.advantage is None for t in r.turns if t.role == "user")
    # An episode-level estimator on the same rollouts clears stale turn advantages (its scalar applies).
    assign_group(group, get_estimator("grpo"))
    assert all(t.advantage is None for r in group for t in r.turns)
