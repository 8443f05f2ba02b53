"""Multi-turn rollouts seen by the weight update: which tokens are trained, with which advantage.

A multi-turn rollout's ``completion_ids`` hold the whole transcript after the first messages:
policy turns and the environment's answers. ``completion_mask`` marks policy tokens (1) and
environment tokens (0; [] = all policy). A policy turn's ``token_span`` selects its tokens, and its
``advantage`` (set by a turn-level estimator such as GiGPO) applies there; every other policy token
gets the rollout's scalar ``advantage``.
"""

from __future__ import annotations

import numpy as np

from evolve.errors import EvolveError
from evolve.rollout import Rollout, Turn

POLICY_ROLE = "assistant"


def policy_turns(rollout: Rollout) -> list[Turn]:
    return [t for t in rollout.turns if t.role == POLICY_ROLE]


def policy_mask(rollout: Rollout) -> list[int]:
    """1 per trained completion token; validated against the completion's length."""
    n = len(rollout.completion_ids)
    if not rollout.completion_mask:
        return [1] * n
    if len(rollout.completion_mask) != n:
        raise EvolveError(f"rollout {rollout.task_id}#{rollout.sample_index}: completion_mask has "
                          f"{len(rollout.completion_mask)} entries for {n} completion tokens")
    return [1 if m else 0 for m in rollout.completion_mask]


def token_advantages(rollout: Rollout) -> list[float] | None:
    """Per-token advantages when some policy turn has its own; None = the scalar applies everywhere."""
    spans = [(t.token_span, t.advantage) for t in policy_turns(rollout)
             if t.token_span is not None and t.advantage is not None]
    if not spans:
        return None
    n = len(rollout.completion_ids)
    out = [float(rollout.advantage or 0.0)] * n
    for (start, end), adv in spans:
        if not 0 <= start <= end <= n:
            raise EvolveError(f"rollout {rollout.task_id}#{rollout.sample_index}: token_span "
                              f"({start}, {end}) outside its {n} completion tokens")
        out[start:end] = [float(adv)] * (end - start)
    return out


def assign_group(group: list[Rollout], estimator) -> np.ndarray:
    """Set ``advantage`` on each rollout (and on each policy turn, for a turn-level estimator).

    Returns every advantage set (rollout and turn level), for the zero-signal check.
    """
    rewards = np.array([r.reward for r in group], dtype=np.float64)
    turns = [policy_turns(r) for r in group]
    if not hasattr(estimator, "turn_advantages") or not any(turns):
        adv = estimator(rewards)
        for r, a, ts in zip(group, adv, turns, strict=True):
            r.advantage = float(a)
            for t in ts:  # an episode-level estimator: its scalar applies to every turn
                t.advantage = None
        return np.asarray(adv, dtype=np.float64)
    episode, per_turn = estimator.turn_advantages(
        rewards, [[t.reward for t in ts] for ts in turns], [[t.observation_hash for t in ts] for ts in turns])
    for r, a, ts, advs in zip(group, episode, turns, per_turn, strict=True):
        r.advantage = float(a)
        for t, ta in zip(ts, advs, strict=True):
            t.advantage = float(ta)
    return np.concatenate([np.asarray(episode, dtype=np.float64), *[np.asarray(a) for a in per_turn]])
