"""The challenger pool of in-group prompt selection.

Reflection's proposals wait here (at most ``cap`` at once) until the loop samples them inside
the GRPO groups next to the incumbent. Each keeps its paired evidence (``evidence.Evidence``)
across generations until the rule promotes or retires it.

Which challengers get the samples in a generation: the ones with the highest upper confidence
bound on their mean difference (a new one has no data, so its bound is +1 and it goes first;
ties: the older one). This is LUCB's optimism (Kalyanakrishnan et al. 2012) on the challenger
side: a challenger that looks no better than the incumbent stops taking samples from one that
might be. Choosing whom to sample from past data keeps each challenger's test valid: its bets
are still placed before its differences are seen.

``pick_thompson`` (``challenger_pick = "thompson"``) draws each challenger's mean difference from
a Gaussian posterior and samples the top draws instead: a new challenger (prior N(0, sd^2)) no
longer pre-empts one that is winning, so the evidence of a promising challenger accumulates
every generation rather than every few (Thompson 1933; the in-group analogue of E-SPL's prompt
choice by rating). With ``untried_first`` (``thompson_untried_first``) a challenger without
evidence still goes first, oldest first: Thompson's prior draw N(0, sd^2) loses to the positive
posteriors of near-neutral measured challengers, and on the ablation's runs the one lesson that
matters waited 5-9 generations in the pool for its first look (measured: it then waits for its
second look instead; not the default). ``weakest`` names the challenger to evict when the pool is
full (``evict_below``): the one least likely to beat the incumbent (by more than ``margin``).
Neither touches the promotion test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evolve.prompt.candidate import Candidate
from evolve.prompt.evidence import (
    PAIR_VAR,
    Evidence,
    EvidenceRule,
    gaussian_posterior,
    pair_variance,
    prob_better,
    upper_bound,
)


@dataclass
class Challenger:
    components: dict[str, str]
    parents: list[str]
    kind: str
    born: int  # generation that proposed it
    incumbent: str  # the incumbent id its evidence is paired against
    evidence: Evidence = field(default_factory=Evidence)
    scores: dict[str, float] = field(default_factory=dict)  # task -> latest mean reward (for merges)
    resets: int = 0  # evidence restarted because the incumbent changed

    @property
    def id(self) -> str:
        return Candidate(self.components).id

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.components)

    def to_dict(self) -> dict:
        return {"components": self.components, "parents": self.parents, "kind": self.kind, "born": self.born,
                "incumbent": self.incumbent, "evidence": self.evidence.to_dict(), "scores": self.scores,
                "resets": self.resets}

    @classmethod
    def from_dict(cls, d: dict) -> Challenger:
        return cls(dict(d["components"]), list(d["parents"]), d["kind"], int(d["born"]), d["incumbent"],
                   Evidence.from_dict(d["evidence"]), dict(d["scores"]), int(d.get("resets", 0)))


class ChallengerPool:
    """Active challengers plus the record of decided ones (JSON-able)."""

    def __init__(self, cap: int = 4) -> None:
        self.cap = cap
        self.active: list[Challenger] = []
        self.decided: list[dict] = []  # {id, kind, born, decided_at, evidence summary}

    def __len__(self) -> int:
        return len(self.active)

    @property
    def room(self) -> int:
        return max(0, self.cap - len(self.active))

    def ids(self) -> set[str]:
        return {c.id for c in self.active} | {d["id"] for d in self.decided}

    def add(self, challenger: Challenger) -> bool:
        """Admit a challenger unless the pool is full or it was seen before."""
        if self.room == 0 or challenger.id in self.ids():
            return False
        self.active.append(challenger)
        return True

    def pick(self, k: int, rule: EvidenceRule) -> list[Challenger]:
        """The ``k`` active challengers with the highest upper bound (new ones first; ties: older)."""
        ranked = sorted(enumerate(self.active),
                        key=lambda ic: (-(upper_bound(ic[1].evidence.diffs, rule.alpha_retire)
                                          if ic[1].evidence.n else 2.0), ic[0]))
        return [c for _, c in ranked[:k]]

    def pick_thompson(self, k: int, prior_sd: float, rng: np.random.Generator,
                      empirical: bool = False, untried_first: bool = False) -> list[Challenger]:
        """The ``k`` active challengers with the highest posterior draws (one draw each, in pool order).
        ``empirical``: each challenger's pair variance is estimated from its differences.
        ``untried_first``: challengers without evidence go first, oldest first (every draw is still
        made, so the generator's use does not depend on the setting)."""
        draws = [rng.normal(*gaussian_posterior(c.evidence.diffs, prior_sd, _var(c, empirical))) for c in self.active]

        def rank(i: int) -> tuple:
            untried = untried_first and not self.active[i].evidence.n
            return (0, i) if untried else (1, -draws[i], i)

        order = sorted(range(len(self.active)), key=rank)
        return [self.active[i] for i in order[:k]]

    def weakest(self, prior_sd: float, below: float, empirical: bool = False,
                margin: float = 0.0) -> Challenger | None:
        """The measured challenger least likely to beat the incumbent by more than ``margin``, if
        that chance is < ``below``."""
        scored = [(prob_better(c.evidence.diffs, prior_sd, _var(c, empirical), margin), i)
                  for i, c in enumerate(self.active) if c.evidence.n]
        if not scored:
            return None
        p, i = min(scored)
        return self.active[i] if p < below else None

    def get(self, cid: str) -> Challenger | None:
        return next((c for c in self.active if c.id == cid), None)

    def close(self, cid: str, generation: int, rule: EvidenceRule) -> Challenger:
        """Move a decided challenger out of the active list, keeping its evidence summary."""
        c = self.get(cid)
        self.active = [x for x in self.active if x.id != cid]
        self.decided.append({"id": cid, "kind": c.kind, "born": c.born, "decided_at": generation,
                             "incumbent": c.incumbent, "evidence": c.evidence.summary(rule)})
        return c

    def reset(self, new_incumbent: str) -> None:
        """The incumbent changed: earlier differences compared with another prompt, so start over."""
        for c in self.active:
            if c.incumbent != new_incumbent:
                c.incumbent, c.evidence, c.resets = new_incumbent, Evidence(), c.resets + 1

    def state_dict(self) -> dict:
        return {"cap": self.cap, "active": [c.to_dict() for c in self.active], "decided": list(self.decided)}

    @classmethod
    def from_state_dict(cls, d: dict | None, cap: int | None = None) -> ChallengerPool:
        pool = cls(cap if cap is not None else (d or {}).get("cap", 4))
        if d:
            pool.active = [Challenger.from_dict(x) for x in d["active"]]
            pool.decided = list(d["decided"])
        return pool


def _var(c: Challenger, empirical: bool) -> float:
    return pair_variance(c.evidence.diffs) if empirical else PAIR_VAR
