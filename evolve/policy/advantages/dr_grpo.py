"""Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): A_i = r_i - mean(r).

No division by the group std (which over-weights near-uniform groups); the length bias is removed
by the constant normaliser in the loss (`loss_type = "dr_grpo"`), not here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def dr_grpo_advantages(rewards: np.ndarray) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.size == 1:  # same convention as grpo: a lone sample is compared with 0
        return r.copy()
    return r - r.mean()


@dataclass(frozen=True)
class DrGrpoEstimator:
    name: str = "dr_grpo"

    def __call__(self, rewards: np.ndarray) -> np.ndarray:
        return dr_grpo_advantages(rewards)
