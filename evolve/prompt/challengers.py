"""The challenger pool of in-group prompt selection.

Reflection's proposals wait here (at most ``cap`` at once) until the loop samples them inside
the GRPO groups next to the incumbent. Each keeps its paired evidence (``evidence.Evidence``)
across generations until the rule promotes or retires it.

Which challenger gets the samples in a generation (``pick_thompson``): each challenger's mean
difference is drawn from a Gaussian posterior (prior N(0, sd^2), each challenger's own pair
variance) and the top draw is sampled, so the evidence of a promising challenger accumulates every
generation rather than every few (Thompson 1933; the in-group analogue of E-SPL's prompt choice by
rating). Choosing whom to sample from past data keeps each challenger's test valid. Measured and
deleted: LUCB allocation (new ones first), the fixed pair variance (0.531 against 0.555) and
untried-first (0.525 against 0.574; benchmarks/results/ablation.json). ``weakest`` names the
challenger to evict when the pool is full (``evict_below``): the one least likely to beat the
incumbent. Neither touches the promotion test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evolve.prompt.candidate import Candidate
from evolve.prompt.evidence import Evidence, EvidenceRule, gaussian_posterior, pair_variance, prob_better


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

    def pick_thompson(self, k: int, prior_sd: float, rng: np.random.Generator) -> list[Challenger]:
        """The ``k`` active challengers with the highest posterior draws (one draw each, in pool order)."""
        draws = [rng.normal(*gaussian_posterior(c.evidence.diffs, prior_sd, pair_variance(c.evidence.diffs)))
                 for c in self.active]
        order = sorted(range(len(self.active)), key=lambda i: (-draws[i], i))
        return [self.active[i] for i in order[:k]]

    def weakest(self, prior_sd: float, below: float) -> Challenger | None:
        """The measured challenger least likely to beat the incumbent, if that chance is < ``below``."""
        scored = [(prob_better(c.evidence.diffs, prior_sd, pair_variance(c.evidence.diffs)), i)
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

