"""NGRPO (Nan et al. 2025): virtual max-reward samples so all-wrong groups still learn.

R' = R ∪ {r_max} × m;  A_i = (r_i - mean(R')) / (std(R') + eps), for the real samples only.
An all-wrong group of 8 (r_max 1, m 1) gets A = -1/3 each instead of 0; an all-correct group
still gets 0. The asymmetric clipping (eps_low 0.16, eps_high 0.24 in the released script) is set
in the loss by the spec, not here.
Departure: std uses ddof=1 like our grpo estimator (the released verl code uses torch.std, also
ddof=1), so the two estimators agree when m = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def ngrpo_advantages(rewards: np.ndarray, r_max: float = 1.0, m: int = 1, eps: float = 1e-6) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    augmented = np.concatenate([r, np.full(m, float(r_max))])
    return (r - augmented.mean()) / (augmented.std(ddof=1) + eps)


@dataclass(frozen=True)
class NgrpoEstimator:
    r_max: float = 1.0
    m: int = 1
    eps: float = 1e-6
    name: str = "ngrpo"

    def __call__(self, rewards: np.ndarray) -> np.ndarray:
        return ngrpo_advantages(rewards, self.r_max, self.m, self.eps)
