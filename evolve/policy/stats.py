"""What one weight update reports (recorded per generation in the lineage)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class UpdateStats:
    loss: float = 0.0
    kl: float = 0.0
    clip_fraction: float = 0.0
    grad_norm: float = 0.0
    mean_advantage_abs: float = 0.0
    zero_variance_fraction: float = 0.0  # groups whose rewards are all equal
    all_fail_fraction: float = 0.0  # groups where every reward <= 0 (NGRPO still learns from these)
    n_groups: int = 0
    n_trained_groups: int = 0
    n_tokens: int = 0
    lr: float = 0.0
    logprob_gap: float = 0.0  # mean |log pi_train - log pi_behaviour| over tokens (sampler mismatch)
    optimizer_steps: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)
