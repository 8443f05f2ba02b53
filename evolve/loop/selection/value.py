"""Value-of-look selection (``[loop.selection] type = "value"``): in-group selection whose allocation
values a look by what it can decide.

The groups, the pairing (common random numbers), the promotion test and its error rate are in-group's
(``in_group.py``, ``evolve.prompt.evidence``). What differs is one valuation, used four ways:

- **Which challenger gets the samples**: the one whose next look is worth most (``look_value``: the
  expected gain a promotion at that look would bring), not Thompson's top posterior draw. A line measured
  at +0.02 over many pairs has a tight posterior whose draws often win a Thompson round, yet one more look
  seldom makes it pass the test and gains little when it does; an untried line, or one with one good look,
  is worth more (docs/ablation.md: on gym seed 20 the boundary lesson waited from generation 4 to 14
  behind such a line).
- **How many of a task's group it gets** (``challenger_share``): half while the pool's evidence under the
  current incumbent is not negative, down to ``min_share`` as the posterior chance that the pool's lines
  help falls (unless the picked line's own evidence is better). Where no line helps, exploring then costs
  the weights few of their samples' prompt shift, and the incumbent trains on the rest.
- **When it is retired**: the losing test waits for ``retire_after_looks`` looks (one unlucky look retired
  seed 25's lesson in the tried rule); the cap and the promotion test are unchanged.
- **Which proposals enter a full pool** (``displaced``): a proposal displaces the measured line (at least
  ``retire_after_looks`` looks) whose next look is worth least, when that is worth less than an untried
  line's. Displacement never promotes, so the promotion error rate is unchanged.

Departures, on purpose: the knowledge gradient (Frazier, Powell & Dayanik 2008) values a measurement by
the expected gain in the best posterior mean; here the only decision a look can change that matters is
the promotion test's, so a look is valued by the gain realised when it crosses that test's threshold
(a posterior belief alone promotes nothing). The
exact sign-flip test is replaced, for valuation only, by its normal approximation (sum d / sqrt(sum d^2)
against the z of alpha / looks), and each line's prior mean is the pool's evidence (at most 0) instead of
0: where most proposals have not helped, an untried one is not presumed neutral. Allocation depends only
on past looks, so every look is still an exact level-alpha/looks test.
Pure functions, plus the strategy class; no torch, no policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from evolve.loop.config import GenerationSeeds
from evolve.loop.context import LoopContext
from evolve.loop.selection.base import Arm
from evolve.loop.selection.configs import ValueSelection
from evolve.loop.selection.in_group import InGroup
from evolve.loop.state import LoopState
from evolve.prompt.challengers import Challenger, ChallengerPool
from evolve.prompt.evidence import PAIR_VAR, EvidenceRule, gaussian_posterior, pair_variance

_N = NormalDist()


_Z = np.linspace(-4.0, 4.0, 81)  # posterior quadrature: standard-normal grid and weights
_W = np.exp(-_Z**2 / 2) / np.sum(np.exp(-_Z**2 / 2))


def look_value(diffs: Sequence[float], pairs: int, rule: EvidenceRule, prior_mean: float, prior_sd: float) -> float:
    """What one more look of ``pairs`` paired tasks is worth: the expected gain in the incumbent's pass
    rate that a promotion at that look would bring, E[max(mu, 0) * P(promoted | mu)] over the Gaussian
    posterior of the line's mean difference mu. P(promoted | mu) uses the normal approximation of the
    sign-flip statistic: promoted when sum d > z(alpha / looks) * sqrt(sum d^2). A line at +0.02 whose next
    look could tip the test is still worth little: promoting it gains little."""
    d = np.asarray(diffs, dtype=np.float64)
    var = pair_variance(d)
    mean, sd = gaussian_posterior(d, prior_sd, var, prior_mean)
    mu = mean + sd * _Z
    squares = float(np.sum(d**2)) + pairs * (var + mu**2)  # expected sum of squares after the look
    need = _N.inv_cdf(1.0 - rule.alpha / rule.looks) * np.sqrt(squares) + rule.margin * (d.size + pairs)
    z = (need - float(np.sum(d)) - pairs * mu) / math.sqrt(pairs * var)
    promoted = np.array([1.0 - _N.cdf(x) for x in z])
    return float(np.sum(_W * np.maximum(mu, 0.0) * promoted))


def pool_evidence(pool: ChallengerPool, incumbent: str) -> tuple[float, int]:
    """(sum, count) of every paired difference measured against ``incumbent``: active lines and decided
    ones (their recorded mean x n), so the valuation remembers what the pool's proposals were worth."""
    total = sum(float(np.sum(c.evidence.diffs)) for c in pool.active if c.incumbent == incumbent)
    n = sum(c.evidence.n for c in pool.active if c.incumbent == incumbent)
    for d in pool.decided:
        if d.get("incumbent") == incumbent:
            total += d["evidence"]["mean_diff"] * d["evidence"]["n"]
            n += d["evidence"]["n"]
    return total, n


def pool_prior_mean(total: float, n: int, prior_sd: float) -> float:
    """A new line's prior mean: the posterior mean of the pool's differences (prior N(0, prior_sd^2)),
    capped at 0, so that negative evidence lowers what an untried line is presumed worth, and positive
    evidence (one good line among many) does not raise it."""
    precision = 1.0 / prior_sd**2 + n / PAIR_VAR
    return min(0.0, total / PAIR_VAR / precision)


def challenger_share(total: float, n: int, own: Sequence[float], prior_mean: float, prior_sd: float, half: int,
                     min_share: int) -> int:
    """Samples of each task's group for the picked challenger: 2 * q * half, clipped to [min_share, half],
    where q is the chance that the pool's lines help on average, or, once this line has evidence of its
    own, the larger of that and the chance that it helps."""
    precision = 1.0 / prior_sd**2 + n / PAIR_VAR
    q = 1.0 - _N.cdf(-(total / PAIR_VAR / precision) * math.sqrt(precision))
    if len(own):
        mean, sd = gaussian_posterior(own, prior_sd, pair_variance(own), prior_mean)
        q = max(q, 1.0 - _N.cdf(-mean / sd))
    return int(min(half, max(min_share, round(2.0 * q * half))))


def looks(c: Challenger) -> int:
    return len(c.evidence.per_generation)


def displaced(pool: ChallengerPool, values: dict[str, float], untried: float, after_looks: int) -> Challenger | None:
    """The line a new proposal displaces from a full pool: among those with at least ``after_looks``
    looks, the one whose next look is worth least, if it is worth less than an untried line's."""
    measured = [c for c in pool.active if looks(c) >= after_looks]
    if not measured:
        return None
    weakest = min(measured, key=lambda c: values[c.id])  # first in pool order on ties
    return weakest if values[weakest.id] < untried else None


@dataclass(frozen=True)
class ValueOfLook(InGroup):
    """``[loop.selection] type = "value"`` (see the module docstring)."""

    sel: ValueSelection
    type: str = "value"

    def _valuation(self, ctx: LoopContext) -> tuple[dict[str, float], float, float, tuple[float, int]]:
        """Each active line's next-look value, an untried line's, the prior mean and the pool's evidence."""
        ev, rule = ctx.evolver, self.rule()
        evidence = pool_evidence(ev.pool, ev.current().id)
        prior = pool_prior_mean(*evidence, self.sel.prior_sd)
        pairs = ctx.config.tasks_per_generation
        values = {c.id: look_value(c.evidence.diffs, pairs, rule, prior, self.sel.prior_sd)
                  for c in ev.pool.active}
        return values, look_value([], pairs, rule, prior, self.sel.prior_sd), prior, evidence

    def arms(self, ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, group_size: int) -> list[Arm]:
        """The incumbent, plus the line whose next look is likeliest to promote it, with its share."""
        ev = ctx.evolver
        ev.pool.cap = self.sel.challenger_pool
        incumbent = Arm(ev.current(), group_size)
        if not ev.pool.active or group_size < ctx.config.samples_per_task:
            return [incumbent]
        values, _, prior, (total, n) = self._valuation(ctx)
        best = max(ev.pool.active, key=lambda c: values[c.id])  # first in pool order on ties
        half = ctx.config.samples_per_task // 2
        per = challenger_share(total, n, best.evidence.diffs, prior, self.sel.prior_sd, half, self.sel.min_share)
        incumbent.samples = group_size - per
        return [incumbent, Arm(best.candidate, per, best)]

    def _weakest(self, ctx: LoopContext) -> Challenger | None:
        values, untried, _, _ = self._valuation(ctx)
        return displaced(ctx.evolver.pool, values, untried, self.sel.retire_after_looks)
