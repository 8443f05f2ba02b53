"""The advantage-estimator extension point."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class AdvantageEstimator(Protocol):
    """Maps the rewards of ONE group (G samples of one task) to one advantage per sample."""

    name: str

    def __call__(self, rewards: np.ndarray) -> np.ndarray: ...


class TurnAdvantageEstimator(AdvantageEstimator, Protocol):
    """An estimator that also credits each policy turn of multi-turn episodes (GiGPO).

    ``turn_advantages(episode_rewards, turn_rewards, anchors)`` takes, per trajectory of one group,
    its policy turns' dense rewards and anchor-state hashes, and returns (one advantage per
    trajectory, one advantage per policy turn of each trajectory).
    """

    def turn_advantages(self, episode_rewards, turn_rewards, anchors) -> tuple[np.ndarray, list[np.ndarray]]: ...
