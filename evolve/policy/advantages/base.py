"""The advantage-estimator extension point."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class AdvantageEstimator(Protocol):
    """Maps the rewards of ONE group (G samples of one task) to one advantage per sample."""

    name: str

    def __call__(self, rewards: np.ndarray) -> np.ndarray: ...
