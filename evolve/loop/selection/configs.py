"""The prompt-selection rules' configs: ``[loop.selection]`` with ``type = "in_group" | "gate"``.

A discriminated union: each type has only its own fields, and a key of the other type (or of none)
is a one-line ConfigError, so a config cannot carry a setting that silently does nothing. Options
that were measured worse were deleted (their figures stay in benchmarks/results/ablation*.json):
two challengers a group (0.407 against 0.555), LUCB allocation, the fixed pair variance (0.531
against 0.555), untried-first allocation (0.525 against 0.574), an eviction margin (no better), the
per-prompt advantage baseline, the betting promotion test (slower to promote: about 6 generations
where the sign-flip rule needs 2-4), selection on the partial-credit reward (0.555 against 0.574),
a smaller challenger share (1 or 2 of each task's 8 samples: 0.408 / 0.452 against the half's 0.482
on the gym, and no nearer weights-only in the no-lesson world: 0.391 / 0.397 against 0.358 and 0.474),
the value-of-look rule (``type = "value"``: looks valued by what they can decide, a share that shrank while the
pool's evidence was negative, displacement by the value of the next look; on seeds 40-47 coupled minus
the best single lever +3.5 points on the gym against in-group's +5.2, coupled minus weights-only -7.7 in
the no-lesson world against -9.0, a helpful line promoted within 8 generations on 4 of 8 seeds under
either: no better, so the simpler rule stays; benchmarks/results/ablation38_gym.json, ablation38_nolesson.json),
the lean share (``lean_after_looks``: 1 of 8 samples once 4 looks found nothing, half again while a line's
evidence was promising; seeds 40-47: the no-lesson floor +1.7 points [-0.7, +4.0] better, the gym -0.3, a
helpful line promoted within 8 generations on 2 of 8 seeds against 4; selection_goals.json),
futility retirement (``futility_margin`` 0.05: a line shown worth under +0.05 a task left the pool so reflection
could propose; seeds 40-47 against in-group, paired: gym +0.9 points [-8.9, +11.5], no-lesson +0.2 [-2.3, +2.7],
a helpful line promoted within 8 generations on 3 of 8 seeds against 4, and a +5-point lesson's chance of
promotion 0.57 against 0.90 in ``evolve plan``; selection_goals.json),
and, at the gate, the strict rule, non-inferior promotion and reusing rollouts other than the
winner's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from evolve.util.config_model import ConfigModel

# Bounds written out at each field (not **kwargs) so the type checker sees the Field call:
# a level or a probability is in (0, 1); a margin or a threshold in [0, 1).


class InGroupSelection(ConfigModel):
    """In-group selection (Fast-Slow Training / E-SPL): the incumbent keeps half of every task's
    group of G samples and one challenger from the pool gets the other half (same seed: common random
    numbers); every rollout trains the weights and scores the prompts; a challenger is promoted when
    the exact paired sign-flip test of its per-task pass-rate differences, over every look so far,
    rejects "no better" at promote_alpha / promote_looks (evolve/prompt/evidence.py). Measured:
    coupled 0.574 against weights-only 0.406 held-out pass@1 on the gym's hard tier
    (benchmarks/results/ablation.json, arm coupled-sfp)."""

    type: Literal["in_group"] = Field("in_group", description="The rule: in-group selection.")
    challenger_pool: int = Field(4, ge=1, description="Most challengers waiting or being measured at once; "
                                 "reflection fills free places.")
    thompson_prior_sd: float = Field(
        0.1, gt=0, description="Prior sd of a challenger's mean paired difference, for Thompson allocation (which "
        "challenger gets a generation's samples) and eviction; never used by the promotion test.")
    evict_below: float = Field(
        0.3, ge=0, lt=1, description="When reflection has a new proposal and the pool is full, retire "
        "(\"retired-evicted\") the measured challenger with the lowest posterior chance of beating the incumbent "
        "if that is below this; 0 = never. Eviction never promotes, so the promotion error rate is unchanged.")
    promote_alpha: float = Field(
        0.1, gt=0, lt=1, description="A challenger whose differences are symmetric about promote_margin is "
        "promoted with probability at most this, over all its looks.")
    promote_looks: int = Field(
        6, ge=1, description="Generations a challenger is tested in before it is retired (\"retired-cap\"); the "
        "divisor of promote_alpha per look (union bound).")
    promote_margin: float = Field(0.0, ge=0, lt=1, description="Mean paired difference (challenger - incumbent, "
                                  "per task) a challenger must beat.")
    retire_alpha: float = Field(0.2, gt=0, lt=1, description="Level of the mirror test that retires a challenger "
                                "that is losing.")
    evidence_cap: int = Field(96, ge=1, description="Paired task differences after which an undecided challenger "
                              "is retired.")


class GateSelection(ConfigModel):
    """GEPA's own rule, kept for comparison with the anchor: proposals are rolled out separately on a
    minibatch (GEPA's strictly-better sum), then on fixed validation tasks, both on the new weights
    with the parent re-measured under the same seed; a proposal replaces its parent only when the
    paired sign-flip test of the per-task pass-rate differences rejects at gate_alpha (never on a tie;
    evolve/prompt/gate_rule.py). The winner's evaluation rollouts feed the next weight update.
    Measured: coupled -2.0 points against weights-only (benchmarks/results/ablation.json, coupled-gate)."""

    type: Literal["gate"] = Field("gate", description="The rule: GEPA's minibatch + validation gate.")
    minibatch_tasks: int = Field(6, ge=1, description="Tasks a proposal is first evaluated on (the reflected-on "
                                 "tasks first).")
    minibatch_samples: int = Field(4, ge=1, description="Samples per minibatch task.")
    val_tasks: int = Field(16, ge=1, description="Validation tasks (train split, fixed) that a proposal passing "
                           "the minibatch gate must win on.")
    val_samples: int = Field(4, ge=1, description="Samples per validation task.")
    gate_alpha: float = Field(0.2, gt=0, lt=1, description="Level of the sign-flip test: the stated rate at which a "
                              "line that changes nothing passes.")
    gate_margin: float = Field(0.0, ge=0, lt=1, description="Mean paired validation difference a proposal must "
                               "exceed (strictly).")


SelectionConfig = Annotated[InGroupSelection | GateSelection, Field(discriminator="type")]
SELECTION_TYPES: dict[str, type[ConfigModel]] = {"in_group": InGroupSelection, "gate": GateSelection}
