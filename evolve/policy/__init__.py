"""Policies: spec, generation backends, GRPO-family updates, checkpoints, pass@k evaluation.

    from evolve.policy import PolicySpec, load_policy, Sample, UpdateStats
"""

from evolve.policy.policy import FROZEN_MESSAGE, Policy, load_policy
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec
from evolve.policy.stats import UpdateStats

__all__ = ["PolicySpec", "load_policy", "Policy", "Sample", "UpdateStats", "FROZEN_MESSAGE"]
