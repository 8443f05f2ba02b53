"""Accumulating paired evidence for a prompt challenger: the promotion rule is a sign-flip test with
corrected looks; an anytime-valid test by betting supplies the reported wealth and confidence bounds
(it was the promotion rule until it measured slower: about 6 generations where sign-flip needs 2-4).

Each generation a challenger and the incumbent are sampled on the same tasks, so every such
task gives one paired difference d = (challenger's mean score) - (incumbent's mean score)
in [-1, 1], the score being the verdict (1 = passed; the random control's reward draw instead,
``LoopConfig.selection_signal``). The differences of all generations are kept, and after every
generation:

- **promote** when the test of H0 "mean d <= margin" rejects at level ``alpha`` (betting; the
  sign-flip rule below tests "d symmetric about the margin" at alpha / looks per look);
- **retire** when the mirror test of "mean d >= 0" rejects at level ``alpha_retire`` (it is
  losing), or when ``cap`` differences were seen without a decision.

Why this rule (testing by betting: Shafer 2021; Waudby-Smith & Ramdas 2023, JRSSB 86(1)):
the wealth K_n = prod_i (1 + lam * (d_i - margin)) of a gambler betting a fixed fraction
``lam`` against H0 is a nonnegative supermartingale under H0 for any lam in [0, 1/(1+margin)),
because E[d_i - margin | past] <= 0. A mixture of such wealths over a fixed grid of lam is one
too, so by Ville's inequality P(sup_n K_n >= 1/alpha) <= alpha. Hence the stated error rate:
**a challenger that does not beat the incumbent by more than ``margin`` is promoted with
probability at most ``alpha``, however many generations it is watched** (no correction for
repeated looks is needed, unlike a t-test re-run every generation). It needs no normality and
adapts to the variance through the bet size, unlike a Hoeffding bound at the range. The grid
mixture (instead of a predictable plug-in bet) costs about ln(len(LAMBDAS)) nats of evidence
but wastes no generation on estimating the variance first.

The rate is per challenger: with many challengers that change nothing, about ``alpha`` of them
(at most) get promoted in expectation; the pool cap and the evidence cap bound how many are tried.

Assumption, written down: given the past, a task's difference has mean <= margin under H0.
Tasks are drawn by the loop's sampler independently of the prompts, and both prompts are
sampled on the same weights, so a line that changes nothing has E[d | past] = 0 exactly.

**The sign-flip rule** (the promotion rule): promote when the mean difference
exceeds ``margin`` and the exact paired sign-flip test of all differences so far
(``gate_rule.signflip_pvalue``) gives p <= alpha / ``looks``; a challenger gets at most ``looks``
looks (generations with evidence), then it is retired. By the union bound over the looks, **a line
whose differences are symmetric about the margin is promoted with probability at most ``alpha``**,
however its looks were scheduled (each difference's sign is symmetric given the past, so every
look is an exact level-alpha/looks test). Why it exists: the betting test must keep its bet safe
against d = -1, so its evidence grows by at most about ln(1 + 0.9 d) per pair even when the
observed differences are small and consistent; with the common random numbers of the in-group
path most differences are 0 or small, and on ablation.json's runs it needed about 6 generations
for the one lesson that matters, which the sign-flip rule promotes after 2-4. The price, written
down: its null is "symmetric about the margin" (exchangeable prompts), stronger than the betting
test's "mean <= margin"; a line that changes the distribution of rewards but not their mean is
covered by the betting test only.

The reported bounds [lower, upper] invert the betting tests on a grid of margins: a
(1 - alpha) anytime-valid confidence sequence for the mean difference (one-sided each way).
Pure functions and a JSON-able dataclass: no torch, no policy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from evolve.prompt.gate_rule import signflip_pvalue

LAMBDAS = (0.2, 0.5, 0.9)  # fractions of the largest safe bet 1/(1+margin); few, so the mixture costs <= ln 3
_GRID = np.round(np.arange(-0.99, 0.99, 0.01), 2)  # open interval: bets stay finite


def log_wealth(diffs, margin: float = 0.0, lambdas=LAMBDAS) -> float:
    """log of the mixture wealth (equal weights over ``lambdas``) against H0: mean(d) <= margin."""
    d = np.asarray(diffs, dtype=np.float64) - margin
    if d.size == 0:
        return 0.0
    cap = 1.0 / (1.0 + margin)  # 1 + lam * (d - margin) > 0 for every d >= -1
    logs = np.array([np.sum(np.log1p(frac * cap * d)) for frac in lambdas])
    top = logs.max()
    return float(top + math.log(np.mean(np.exp(logs - top))))


def rejects_at_most(diffs, margin: float, alpha: float) -> bool:
    """True when the betting test rejects H0 "mean d <= margin" at level ``alpha``."""
    return log_wealth(diffs, margin) >= math.log(1.0 / alpha)


def lower_bound(diffs, alpha: float) -> float:
    """Largest grid margin m whose H0 "mean <= m" is rejected (-1 when none): an anytime-valid
    (1 - alpha) lower confidence bound on the mean difference."""
    if len(diffs) == 0:
        return -1.0
    best = -1.0
    for m in _GRID:
        if m >= 0.995:
            break
        if rejects_at_most(diffs, float(m), alpha):
            best = float(m)
        else:
            break  # wealth falls as the margin rises
    return best


def upper_bound(diffs, alpha: float) -> float:
    """The mirror image: an anytime-valid (1 - alpha) upper confidence bound on the mean."""
    return -lower_bound([-x for x in diffs], alpha)


PAIR_VAR = 0.12  # variance of one paired task difference (4 vs 4 samples), measured: sd 0.34 in ablation.json


def pair_variance(diffs, prior_var: float = PAIR_VAR, prior_n: float = 2.0) -> float:
    """The variance of one paired difference, estimated from ``diffs`` and shrunk towards
    ``prior_var`` with ``prior_n`` pseudo-pairs (Thompson allocation and eviction). Under common
    random numbers most differences are 0, far below the fixed PAIR_VAR, which came from all
    challengers of a run (harmful ones included)."""
    d = np.asarray(diffs, dtype=np.float64)
    ss = float(np.sum((d - d.mean()) ** 2)) if d.size > 1 else 0.0
    return (ss + prior_n * prior_var) / (max(d.size - 1, 0) + prior_n)


def gaussian_posterior(diffs, prior_sd: float, pair_var: float = PAIR_VAR,
                       prior_mean: float = 0.0) -> tuple[float, float]:
    """(mean, sd) of the posterior of a challenger's mean paired difference: prior
    N(prior_mean, prior_sd^2), each difference N(mu, pair_var) (a working model used only to
    *allocate* samples; the promotion test above does not rely on it)."""
    precision = 1.0 / prior_sd**2 + len(diffs) / pair_var
    return float((prior_mean / prior_sd**2 + np.sum(diffs) / pair_var) / precision), float(precision ** -0.5)


def prob_better(diffs, prior_sd: float, pair_var: float = PAIR_VAR, margin: float = 0.0) -> float:
    """Posterior probability that the mean paired difference is > ``margin``."""
    mean, sd = gaussian_posterior(diffs, prior_sd, pair_var)
    return 0.5 * (1.0 + math.erf((mean - margin) / (sd * math.sqrt(2.0))))


@dataclass
class Evidence:
    """One challenger's paired differences against the incumbent, and its decision."""

    diffs: list[float] = field(default_factory=list)
    per_generation: list[int] = field(default_factory=list)  # how many differences each generation gave
    decision: str = "active"  # active | promoted | retired-losing | retired-cap | retired-evicted | retired-reset

    @property
    def n(self) -> int:
        return len(self.diffs)

    @property
    def mean(self) -> float:
        return float(np.mean(self.diffs)) if self.diffs else 0.0

    def summary(self, rule: EvidenceRule) -> dict:
        out = {"n": self.n, "generations": len(self.per_generation), "mean_diff": round(self.mean, 4),
               "lower": round(lower_bound(self.diffs, rule.alpha), 3),
               "upper": round(upper_bound(self.diffs, rule.alpha_retire), 3),
               "log_wealth": round(log_wealth(self.diffs, rule.margin), 3),
               "threshold": round(math.log(1.0 / rule.alpha), 3), "decision": self.decision}
        out.update(test="signflip", p=round(signflip_pvalue(self.diffs, rule.margin), 5),
                   p_threshold=round(rule.alpha / rule.looks, 5))
        return out

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Evidence:
        return cls(list(d["diffs"]), list(d["per_generation"]), d["decision"])


@dataclass(frozen=True)
class EvidenceRule:
    """When to promote or retire a challenger: the sign-flip rule with corrected looks (see the module
    docstring for the error rate). The betting test is no longer a promotion rule (it needed about 6
    generations where this one needs 2-4); its wealth and bounds are still reported next to the p-value."""

    alpha: float = 0.1  # P(promote a challenger symmetric about incumbent + margin) <= alpha
    margin: float = 0.0
    alpha_retire: float = 0.2  # a wrong retirement only costs a chance, so a looser level
    cap: int = 96  # paired differences after which an undecided challenger is retired
    looks: int = 6  # generations a challenger is tested in; each look runs at alpha / looks

    def decide(self, ev: Evidence, new_diffs: list[float]) -> str:
        """Add one generation's differences and return the (possibly new) decision."""
        if ev.decision != "active":
            return ev.decision
        ev.diffs.extend(float(x) for x in new_diffs)
        ev.per_generation.append(len(new_diffs))
        mean = float(np.mean(ev.diffs))
        if mean > self.margin and signflip_pvalue(ev.diffs, self.margin) <= self.alpha / self.looks:
            ev.decision = "promoted"
        elif mean < 0 and signflip_pvalue([-x for x in ev.diffs]) <= self.alpha_retire:
            ev.decision = "retired-losing"  # no correction for looks: a wrong retirement only costs a chance
        elif ev.n >= self.cap or len(ev.per_generation) >= self.looks:
            ev.decision = "retired-cap"
        return ev.decision
