"""Which samples share an advantage baseline when several prompts share a task's group.

In-group prompt selection (Fast-Slow Training, arXiv 2605.12484; E-SPL, arXiv 2602.14697)
samples one task under several prompts. The estimator (grpo, dr_grpo, ngrpo) is then applied
to one of two partitions of the task's samples:

- ``per_prompt``: one baseline per (task, prompt) -- E-SPL's ``normal``. Each prompt's samples
  are compared only with each other, so the weights learn what is better *under that prompt*.
- ``task``: one baseline per task across prompts -- E-SPL's ``marginalize``, FST's one advantage
  across the group. A sample under a better prompt gets a positive advantage, so the weights are
  also pushed towards what the better prompt makes the model do.

Pure functions of rewards and labels; the loop builds the same partitions from rollouts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

BASELINES = ("per_prompt", "task")


def baseline_partition(tasks: Sequence[str], prompts: Sequence[str], baseline: str) -> list[list[int]]:
    """Indices of the samples that share a baseline, each list in input order, lists in first-seen order."""
    if baseline not in BASELINES:
        raise ValueError(f"unknown advantage baseline {baseline!r}; known: {', '.join(BASELINES)}")
    parts: dict[tuple, list[int]] = {}
    for i, (t, p) in enumerate(zip(tasks, prompts, strict=True)):
        key = (t, p) if baseline == "per_prompt" else (t,)
        parts.setdefault(key, []).append(i)
    return list(parts.values())


def in_group_advantages(rewards: Sequence[float], tasks: Sequence[str], prompts: Sequence[str], baseline: str,
                        estimator: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """One advantage per sample: ``estimator`` applied within each part of the baseline partition."""
    r = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(r)
    for idx in baseline_partition(tasks, prompts, baseline):
        out[idx] = estimator(r[idx])
    return out
