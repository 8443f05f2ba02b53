"""The prompt-selection rules' configs: ``[loop.selection]`` with ``type = "in_group" | "value" | "gate"``.

A discriminated union: each type has only its own fields, and a key of the other type (or of none)
is a one-line ConfigError, so a config cannot carry a setting that silently does nothing. Options
that were measured worse were deleted (their figures stay in benchmarks/results/ablation*.json):
two challengers a group (0.407 against 0.555), LUCB allocation, the fixed pair variance (0.531
against 0.555), untried-first allocation (0.525 against 0.574), an eviction margin (no better), the
per-prompt advantage baseline, the betting promotion test (slower to promote: about 6 generations
where the sign-flip rule needs 2-4), selection on the partial-credit reward (0.555 against 0.574),
and, at the gate, the strict rule, non-inferior promotion and reusing rollouts other than the
winner's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from evolve.errors import ConfigError


def _positive_ints(cfg, names: tuple[str, ...], bad) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            bad(f"selection.{name} must be a positive integer, got {value!r}")


def _in_range(cfg, names: tuple[str, ...], low: float, high: float, bad, closed_low: bool = False) -> None:
    for name in names:
        value = getattr(cfg, name)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and (
            (low <= value if closed_low else low < value) and value < high)
        if not ok:
            bracket = "[" if closed_low else "("
            bad(f"selection.{name} must be in {bracket}{low}, {high}), got {value!r}")


@dataclass(frozen=True)
class InGroupSelection:
    """In-group selection (Fast-Slow Training / E-SPL): the incumbent keeps half of every task's
    group of G samples and one challenger from the pool gets the other half (same seed: common random
    numbers); every rollout trains the weights and scores the prompts; a challenger is promoted when
    the exact paired sign-flip test of its per-task pass-rate differences, over every look so far,
    rejects "no better" at promote_alpha / promote_looks (evolve/prompt/evidence.py). Measured:
    coupled 0.574 against weights-only 0.406 held-out pass@1 on the gym's hard tier
    (benchmarks/results/ablation.json, arm coupled-sfp)."""

    type: ClassVar[str] = "in_group"
    challenger_pool: int = 4
    """Most challengers waiting or being measured at once; reflection fills free places."""
    thompson_prior_sd: float = 0.1
    """Prior sd of a challenger's mean paired difference, for Thompson allocation (which challenger
    gets a generation's samples) and eviction; never used by the promotion test."""
    evict_below: float = 0.3
    """When reflection has a new proposal and the pool is full, retire ("retired-evicted") the
    measured challenger with the lowest posterior chance of beating the incumbent if that is below
    this; 0 = never. Eviction never promotes, so the promotion error rate is unchanged."""
    promote_alpha: float = 0.1
    """A challenger whose differences are symmetric about ``promote_margin`` is promoted with
    probability at most this, over all its looks."""
    promote_looks: int = 6
    """Generations a challenger is tested in before it is retired ("retired-cap"); the divisor of
    promote_alpha per look (union bound)."""
    promote_margin: float = 0.0
    """Mean paired difference (challenger - incumbent, per task) a challenger must beat."""
    retire_alpha: float = 0.2
    """Level of the mirror test that retires a challenger that is losing."""
    evidence_cap: int = 96
    """Paired task differences after which an undecided challenger is retired."""

    def validate(self, bad) -> None:
        _positive_ints(self, ("challenger_pool", "promote_looks", "evidence_cap"), bad)
        _in_range(self, ("promote_alpha", "retire_alpha"), 0, 1, bad)
        _in_range(self, ("evict_below", "promote_margin"), 0, 1, bad, closed_low=True)
        if not (isinstance(self.thompson_prior_sd, int | float) and self.thompson_prior_sd > 0):
            bad(f"selection.thompson_prior_sd must be positive, got {self.thompson_prior_sd!r}")


@dataclass(frozen=True)
class ValueSelection:
    """In-group selection (as ``in_group``: same groups, same promotion test, same error rate) with one
    allocation rule that values a look by what it can decide (evolve/loop/selection/value.py): the
    challenger whose next look is likeliest to promote it gets the samples, its share shrinks while the
    pool's evidence is negative, the losing test waits for retire_after_looks looks, and a proposal
    displaces a measured line whose next look is worth less than an untried line's."""

    type: ClassVar[str] = "value"
    challenger_pool: int = 4
    """Most challengers waiting or being measured at once; reflection fills free places."""
    prior_sd: float = 0.15
    """Prior sd of a challenger's mean paired difference (its prior mean is the pool's evidence, at
    most 0); used to value looks and size shares, never by the promotion test. 0.15: the gym's lesson
    moved the pass rate by +0.03 to +0.22 a paired task a look (docs/ablation.md)."""
    min_share: int = 1
    """Fewest samples of a task's group the challenger gets when the pool's evidence is negative (at
    most half the group, which it gets while the evidence is not negative)."""
    retire_after_looks: int = 2
    """Looks before a losing challenger can be retired or a weak one displaced (not one unlucky look)."""
    promote_alpha: float = 0.1
    """As in_group: a line symmetric about promote_margin is promoted with probability at most this."""
    promote_looks: int = 6
    """As in_group: looks per challenger, the divisor of promote_alpha per look."""
    promote_margin: float = 0.0
    """As in_group: mean paired difference a challenger must beat."""
    retire_alpha: float = 0.2
    """As in_group: level of the mirror test that retires a losing challenger."""
    evidence_cap: int = 96
    """As in_group: paired task differences after which an undecided challenger is retired."""

    def validate(self, bad) -> None:
        _positive_ints(self, ("challenger_pool", "promote_looks", "evidence_cap", "min_share",
                              "retire_after_looks"), bad)
        _in_range(self, ("promote_alpha", "retire_alpha"), 0, 1, bad)
        _in_range(self, ("promote_margin",), 0, 1, bad, closed_low=True)
        if not (isinstance(self.prior_sd, int | float) and self.prior_sd > 0):
            bad(f"selection.prior_sd must be positive, got {self.prior_sd!r}")


@dataclass(frozen=True)
class GateSelection:
    """GEPA's own rule, kept for comparison with the anchor: proposals are rolled out separately on a
    minibatch (GEPA's strictly-better sum), then on fixed validation tasks, both on the new weights
    with the parent re-measured under the same seed; a proposal replaces its parent only when the
    paired sign-flip test of the per-task pass-rate differences rejects at gate_alpha (never on a tie;
    evolve/prompt/gate_rule.py). The winner's evaluation rollouts feed the next weight update.
    Measured: coupled -2.0 points against weights-only (benchmarks/results/ablation.json, coupled-gate)."""

    type: ClassVar[str] = "gate"
    minibatch_tasks: int = 6
    """Tasks a proposal is first evaluated on (the reflected-on tasks first)."""
    minibatch_samples: int = 4
    """Samples per minibatch task."""
    val_tasks: int = 16
    """Validation tasks (train split, fixed) that a proposal passing the minibatch gate must win on."""
    val_samples: int = 4
    """Samples per validation task."""
    gate_alpha: float = 0.2
    """Level of the sign-flip test: the stated rate at which a line that changes nothing passes."""
    gate_margin: float = 0.0
    """Mean paired validation difference a proposal must exceed (strictly)."""

    def validate(self, bad) -> None:
        _positive_ints(self, ("minibatch_tasks", "minibatch_samples", "val_tasks", "val_samples"), bad)
        _in_range(self, ("gate_alpha",), 0, 1, bad)
        _in_range(self, ("gate_margin",), 0, 1, bad, closed_low=True)


SELECTION_TYPES: dict[str, type] = {c.type: c for c in (InGroupSelection, ValueSelection, GateSelection)}
SelectionConfig = InGroupSelection | ValueSelection | GateSelection


def selection_from_dict(data: Any, source: str) -> SelectionConfig:
    """``[loop.selection]`` (a table with ``type``; absent = in_group with its defaults)."""
    def bad(msg: str) -> None:
        raise ConfigError(f"{source}: {msg}")

    if isinstance(data, InGroupSelection | ValueSelection | GateSelection):
        return data
    if not isinstance(data, dict):
        bad(f"selection must be a table with type = {' | '.join(map(repr, SELECTION_TYPES))}, got {data!r}")
    values = dict(data)
    kind = values.pop("type", "in_group")
    cls = SELECTION_TYPES.get(kind)
    if cls is None:
        bad(f"selection.type must be one of {', '.join(SELECTION_TYPES)}, got {kind!r}")
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        owner = next((t for t, c in SELECTION_TYPES.items() if unknown[0] in {f.name for f in fields(c)}), None)
        why = f"it belongs to selection type {owner!r}" if owner else "no selection type has it"
        bad(f"selection.{unknown[0]} does nothing under type {kind!r} ({why}; {kind} keys: {', '.join(known)})")
    try:
        cfg = cls(**values)
    except TypeError as e:
        bad(f"selection: {e}")
    cfg.validate(bad)
    return cfg


def selection_to_dict(cfg: SelectionConfig) -> dict:
    return {"type": cfg.type, **asdict(cfg)}
