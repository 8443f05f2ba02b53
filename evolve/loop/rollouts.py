"""The loop's side of the episode path (``evolve.env.episode``): rolling out with the loop's
environment, policy and verifier, and the held-out summary (pass@k plus failure classes).

The loop owns rollouts: the same objects feed the weight update, reflection and the lineage.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

import numpy as np

from evolve.env.episode import (
    collect,
    collect_arms,
    pass_at_k_rows,
    passed_before_augmentation,
    random_reward,
    task_scores,
    verify,
)
from evolve.loop.routing import failure_class
from evolve.metrics import HeldoutMetrics, OriginalMetrics
from evolve.rollout import Rollout
from evolve.verification.types import Task

__all__ = ["PENDING_WEIGHTS", "heldout_metrics", "one_request", "original_metrics", "random_reward", "roll_out",
           "roll_out_arms", "task_scores", "verify"]

PENDING_WEIGHTS = "pending"  # replaced by the new weights version at commit


def roll_out(ctx, candidate, tasks: list[Task], n: int, seed: int, purpose: str,
             weights_version: str) -> list[Rollout]:
    """G episodes per task through the loop's environment; not yet verified."""
    return collect(ctx.env, ctx.policy, candidate, tasks, n, seed, purpose, weights_version, ctx.verifier)


def one_request(ctx, arms) -> bool:
    """Whether this generation's arms go to the engine as one request (``loop.one_request``): only when the
    backend draws each prompt's samples from the request's seed alone (``seed_per_prompt``: vLLM, whose
    seeded requests each get their own generator), so every arm keeps the common random numbers it gets
    from its own request, and only when the arms have one group size (a request has one ``n``)."""
    backend = getattr(ctx.policy, "backend", None)
    return (ctx.config.one_request and len(arms) > 1 and len({a.samples for a in arms}) == 1
            and bool(getattr(backend, "seed_per_prompt", False)))


def roll_out_arms(ctx, arms, tasks: list[Task], seed: int, weights_version: str) -> None:
    """Fill every arm's ``rollouts`` (the same ``seed`` for every prompt: common random numbers): one engine
    request for all arms where ``one_request`` allows, else one request per arm. Measured (issue 36,
    benchmarks/results/loop_throughput.json): on vLLM's CPU build one request of 64 rows instead of two of
    32 keeps the engine's batch full while the long rows of the first request finish."""
    if one_request(ctx, arms):
        parts = collect_arms(ctx.env, ctx.policy, [a.candidate for a in arms], tasks, arms[0].samples, seed,
                             "train", weights_version, ctx.verifier)
        for arm, rollouts in zip(arms, parts, strict=True):
            arm.rollouts = rollouts
        return
    for arm in arms:
        arm.rollouts = roll_out(ctx, arm.candidate, tasks, arm.samples, seed, "train", weights_version)


def _pass_at(rows: dict[str, dict], ks: tuple[int, ...]) -> dict[str, float]:
    out = {}
    for k in ks:
        vals = [r[f"pass@{k}"] for r in rows.values() if r["n"] >= k]
        out[f"pass@{k}"] = float(np.mean(vals)) if vals else 0.0
    return out


def heldout_metrics(rollouts: list[Rollout], ks: tuple[int, ...]) -> HeldoutMetrics:
    """pass@k (unbiased) over tasks, plus the failure-class counts."""
    rows = pass_at_k_rows(rollouts, ks)
    out: dict[str, Any] = dict(_pass_at(rows, ks))
    classes = Counter(c for c in (failure_class(r) for r in rollouts) if c)
    out["failure_classes"] = dict(sorted(classes.items()))
    out["samples"] = len(rollouts)
    out["tasks"] = len(rows)
    return cast(HeldoutMetrics, out)  # pass@k keys are built from ks: mypy cannot see them as literals


def original_metrics(ctx, rollouts: list[Rollout], ks: tuple[int, ...],
                     augmented: HeldoutMetrics) -> OriginalMetrics:
    """Under a verifier version: held-out pass@k under the tasks' own tests, and the gap to ``augmented``
    (the same rollouts' figures under the added tests): how much of the pass rate the added tests reject."""
    passed, again = passed_before_augmentation(ctx.verifier, ctx.original_tasks, rollouts)
    out: dict[str, Any] = dict(_pass_at(pass_at_k_rows(rollouts, ks, passed), ks))
    out["gap"] = {k: v - augmented[k] for k, v in out.items()}  # type: ignore[literal-required]  # pass@k keys
    out["reverified"] = again  # failures on augmented tasks verified a second time, on the original task
    return cast(OriginalMetrics, out)  # as heldout_metrics
