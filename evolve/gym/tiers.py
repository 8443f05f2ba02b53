"""Difficulty tiers of the tiny-coder gym, drawn from the existing splits (no new bootstrap).

``hard``: every task where the teacher's CMP bug applies ("at least k" / "at most k" filters),
plus an equal number of the other tasks (a fixed, seeded subsample). The default model inherits
the teacher's 0.9 CMP bug rate, so on the CMP half a group of 8 samples usually fails entirely:
GRPO gets no signal there except from rare successes, while the lesson
"Include the boundary value k." -- which the offline reflector retrieves from the boundary
failures' signatures -- switches the bug off (measured in ``benchmarks/results/hard_tier.json``).
The other half keeps the usual mix, so the weights still have mixed groups to learn from.
Held-out tasks get the same treatment, so held-out pass@1 measures the same regime.
"""

from __future__ import annotations

import numpy as np

from evolve.errors import ConfigError
from evolve.gym.notes import CMP
from evolve.verification.types import Task


def hard_tier(tasks: list[Task], seed: int = 0) -> list[Task]:
    hard = [t for t in tasks if CMP in t.meta.get("bug_modes", ())]
    rest = [t for t in tasks if CMP not in t.meta.get("bug_modes", ())]
    keep = set(np.random.default_rng(seed).permutation(len(rest))[:len(hard)].tolist())
    chosen = {t.task_id for t in hard} | {rest[i].task_id for i in keep}
    return [t for t in tasks if t.task_id in chosen]  # the split's own order


TIERS = {"hard": hard_tier}


def load_tier(name: str, tasks: list[Task], seed: int = 0) -> list[Task]:
    try:
        return TIERS[name](tasks, seed)
    except KeyError:
        raise ConfigError(f"unknown gym tier {name!r}; known: {', '.join(TIERS)}") from None
