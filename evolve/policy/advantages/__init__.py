"""Advantage estimators (pure numpy): ``get_estimator(name, **params)``."""

from __future__ import annotations

from evolve.errors import ConfigError
from evolve.policy.advantages.base import AdvantageEstimator
from evolve.policy.advantages.dr_grpo import DrGrpoEstimator, dr_grpo_advantages
from evolve.policy.advantages.gigpo import GigpoEstimator, gigpo_advantages
from evolve.policy.advantages.grpo import GrpoEstimator, grpo_advantages
from evolve.policy.advantages.ngrpo import NgrpoEstimator, ngrpo_advantages

ESTIMATORS = {"grpo": GrpoEstimator, "dr_grpo": DrGrpoEstimator, "ngrpo": NgrpoEstimator, "gigpo": GigpoEstimator}


def get_estimator(name: str, **params) -> AdvantageEstimator:
    try:
        cls = ESTIMATORS[name]
    except KeyError:
        raise ConfigError(f"unknown advantage estimator {name!r}; known: {', '.join(ESTIMATORS)}") from None
    return cls(**params)


__all__ = [
    "AdvantageEstimator", "get_estimator", "ESTIMATORS", "grpo_advantages", "dr_grpo_advantages",
    "ngrpo_advantages", "GrpoEstimator", "DrGrpoEstimator", "NgrpoEstimator", "GigpoEstimator", "gigpo_advantages",
]
