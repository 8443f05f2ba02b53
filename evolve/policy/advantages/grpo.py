"""GRPO (Shao et al. 2024): A_i = (r_i - mean(r)) / (std(r) + eps), outcome reward on every token.

As verl (`compute_grpo_outcome_advantage`) and TRL: the unbiased std (torch.std, ddof=1),
eps = 1e-6 (TRL uses 1e-4), and a group of size 1 gets mean 0 and std 1 (verl), so its advantage is
its raw reward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def grpo_advantages(rewards: np.ndarray, eps: float = 1e-6, scale: bool = True) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.size == 1:
        return r.copy()
    centred = r - r.mean()
    if not scale:
        return centred
    return centred / (r.std(ddof=1) + eps)


@dataclass(frozen=True)
class GrpoEstimator:
    eps: float = 1e-6  # added to the std (verl default)
    scale: bool = True  # False = TRL scale_rewards="none"
    name: str = "grpo"

    def __call__(self, rewards: np.ndarray) -> np.ndarray:
        return grpo_advantages(rewards, self.eps, self.scale)
