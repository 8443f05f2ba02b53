"""GiGPO (Feng et al., NeurIPS 2025, arXiv 2505.10978): group-in-group advantages for multi-turn episodes.

Two levels, both critic-free:

- episode level (Eq. 3): the group's G trajectories of one task,
  A^E_i = (R_i - mean(R)) / F_norm, with F_norm = std (``scale``) or 1;
- step level (Eqs. 5-7): every policy step t of trajectory i acted on an environment state s_{i,t}.
  Steps of the group's trajectories that acted on the *identical* state (the anchor state, matched
  by ``Turn.observation_hash``) form one step group. Each step's discounted return
  R_{i,t} = sum_{k>=t} gamma^(k-t) r_{i,k} is normalised within its step group,
  A^S_{i,t} = (R_{i,t} - mean) / F_norm;
- combined (Eq. 8): A_{i,t} = A^E_i + omega * A^S_{i,t}, applied to the tokens of step t.

Conventions and departures, on purpose:
- The episode mean/std is taken over trajectories, as the paper writes Eq. 3. verl-agent's
  ``episode_norm_reward`` defaults to taking it over *step rows* (each trajectory counted once per
  step it took), which weights long trajectories more; we do not.
- Episode level uses this project's grpo conventions (``grpo_advantages``): std with ddof=1,
  eps added to the std, a group of one gets mean 0 / std 1. F_norm follows the spec's
  ``scale_rewards`` ("group" = std as in GRPO, "none" = 1 as in Dr. GRPO); verl-agent's default
  mode is "mean_norm" (F_norm = 1).
- A step group of one (a state no other trajectory reached), and a step with no observation hash,
  gets step advantage 0, as verl-agent's ``step_norm_reward`` (its mean is its own return).
- Step rewards: ``step_rewards = "final"`` puts the episode's reward on its last policy step and 0
  elsewhere (the sparse setting of the paper's ALFWorld/WebShop runs); "dense" uses each earlier
  step's ``Turn.reward`` (e.g. the visible-test pass fraction after that turn) and the episode's
  reward on the last step. The episode return R_i stays the rollout's reward in both modes.
- A single-turn rollout has no step groups (there is nothing to ground beyond the episode), so GiGPO
  reduces exactly to its episode level: grpo (scale) or dr_grpo (no scale).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from evolve.policy.advantages.grpo import grpo_advantages

STEP_REWARDS = ("final", "dense")


def discounted_returns(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """R_t = r_t + gamma * R_{t+1}, from the last step backwards (Eq. 5)."""
    r = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(r)
    running = 0.0
    for t in range(r.size - 1, -1, -1):
        running = r[t] + gamma * running
        out[t] = running
    return out


def _normalise(values: np.ndarray, scale: bool, eps: float) -> np.ndarray:
    if values.size == 1:
        return np.zeros(1)
    centred = values - values.mean()
    return centred / (values.std(ddof=1) + eps) if scale else centred


def step_advantages(returns: Sequence[np.ndarray], anchors: Sequence[Sequence[Hashable | None]],
                    scale: bool = True, eps: float = 1e-6) -> list[np.ndarray]:
    """A^S per step: each step's return normalised within the steps that share its anchor state."""
    groups: dict[Hashable, list[tuple[int, int]]] = {}
    for i, traj in enumerate(anchors):
        if len(traj) != len(returns[i]):
            raise ValueError(f"trajectory {i}: {len(traj)} anchors for {len(returns[i])} returns")
        for t, anchor in enumerate(traj):
            key = ("unique", i, t) if anchor is None else ("state", anchor)
            groups.setdefault(key, []).append((i, t))
    out = [np.zeros(len(r)) for r in returns]
    for members in groups.values():
        vals = np.array([returns[i][t] for i, t in members], dtype=np.float64)
        for (i, t), a in zip(members, _normalise(vals, scale, eps), strict=True):
            out[i][t] = a
    return out


def gigpo_advantages(episode_rewards: Sequence[float], step_rewards: Sequence[Sequence[float]],
                     anchors: Sequence[Sequence[Hashable | None]], omega: float = 1.0, gamma: float = 0.95,
                     eps: float = 1e-6, scale: bool = True) -> tuple[np.ndarray, list[np.ndarray]]:
    """(A^E per trajectory, A^E_i + omega * A^S_{i,t} per step of each trajectory).

    ``step_rewards[i]`` and ``anchors[i]`` list trajectory i's policy steps in order (empty lists for
    single-turn rollouts, whose only advantage is then A^E).
    """
    episode = grpo_advantages(np.asarray(episode_rewards, dtype=np.float64), eps, scale)
    if len(step_rewards) != episode.size or len(anchors) != episode.size:
        raise ValueError("one list of step rewards and of anchors per trajectory is needed")
    returns = [discounted_returns(r, gamma) for r in step_rewards]
    steps = step_advantages(returns, anchors, scale, eps)
    return episode, [episode[i] + omega * s for i, s in enumerate(steps)]


def trajectory_steps(episode_reward: float, turn_rewards: Sequence[float | None], mode: str) -> list[float]:
    """Step rewards of one trajectory's policy turns (see the module docstring for the modes)."""
    if mode not in STEP_REWARDS:
        raise ValueError(f"unknown gigpo step_rewards {mode!r}; known: {', '.join(STEP_REWARDS)}")
    n = len(turn_rewards)
    if n == 0:
        return []
    early = [float(r or 0.0) for r in turn_rewards[:-1]] if mode == "dense" else [0.0] * (n - 1)
    return [*early, float(episode_reward)]


@dataclass(frozen=True)
class GigpoEstimator:
    omega: float = 1.0  # weight of the step level (paper and verl-agent: 1)
    gamma: float = 0.95  # discount of step returns (verl-agent default)
    eps: float = 1e-6
    scale: bool = True  # F_norm = std; False = 1
    step_rewards: str = "final"
    name: str = "gigpo"

    def __call__(self, rewards: np.ndarray) -> np.ndarray:
        """Episode level only: what a group of single-turn rollouts gets."""
        return grpo_advantages(rewards, self.eps, self.scale)

    def turn_advantages(self, episode_rewards: Sequence[float], turn_rewards: Sequence[Sequence[float | None]],
                        anchors: Sequence[Sequence[Hashable | None]]) -> tuple[np.ndarray, list[np.ndarray]]:
        steps = [trajectory_steps(R, tr, self.step_rewards) for R, tr in zip(episode_rewards, turn_rewards,
                                                                             strict=True)]
        return gigpo_advantages(episode_rewards, steps, anchors, self.omega, self.gamma, self.eps, self.scale)
