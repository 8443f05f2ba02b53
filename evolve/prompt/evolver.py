"""The stepwise prompt evolver the loop drives inside each generation.

select_parent -> propose (reflection on verified rollouts, maybe a merge) -> the loop
evaluates each proposal on a minibatch -> accept (strictly better sum, as in GEPA) ->
the loop evaluates accepted ones on the validation tasks -> observe_val (pool + per-task
Pareto frontier) -> current() is what the next generation rolls out with.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from evolve.errors import EvolveError
from evolve.prompt.candidate import Candidate
from evolve.prompt.challengers import Challenger, ChallengerPool
from evolve.prompt.config import RECORDED_ABSENT_MEANT, PromptEvolutionConfig
from evolve.prompt.demos import demo_set_proposal
from evolve.prompt.evidence import EvidenceRule
from evolve.prompt.failure_pool import build_pooled_dataset
from evolve.prompt.lessons import split_lessons
from evolve.prompt.pareto import mean, pareto_front, select_from_front, try_merge
from evolve.prompt.reflect.base import Reflector
from evolve.prompt.reflective_dataset import ReflectiveDataset, build_reflective_dataset
from evolve.rollout import Rollout


@dataclass
class Proposal:
    """A candidate to evaluate. ``parents`` are candidate ids (two for a merge)."""

    candidate: Candidate
    parents: list[str]
    kind: str  # an offline edit kind, "reflection" (LM) or "merge"
    lm_call_ids: list[int] = field(default_factory=list)
    rationale: str = ""

    @property
    def proposed_by(self) -> str:
        """The lineage's ``proposed_by`` for this prompt version."""
        return "merge" if self.kind == "merge" else "reflection"

    @property
    def meta(self) -> dict:
        return {"kind": self.kind, "rationale": self.rationale}


@dataclass
class _Entry:
    components: dict[str, str]
    parents: list[str]
    proposed_by: str
    val_scores: dict[str, float] | None = None

    @property
    def id(self) -> str:
        return Candidate(self.components).id


class PromptEvolver:
    """GEPA-style evolution state over a pool of candidates; JSON-able via :meth:`state_dict`."""

    def __init__(self, config: PromptEvolutionConfig, reflector: Reflector, seed_candidate: Candidate) -> None:
        self.config = config
        self.reflector = reflector
        self.entries: list[_Entry] = [_Entry(dict(seed_candidate.components), [], "seed")]
        self.pending: dict[str, dict] = {}  # proposed, not yet in the pool: id -> {components, parents, kind}
        self.merges_performed: tuple[list, list] = ([], [])
        self.merges_due = 0
        self.metric_calls = 0
        self.lm_cost = 0.0
        self.failed: list[dict] = []  # failed reflections: {parent, error, lm_call_ids}
        self.history: list[dict] = []  # accept decisions
        self.incumbent: str | None = None  # set by promote(); None = best mean validation score
        self.rejected: dict[str, int] = {}  # lesson line -> times a proposal adding it failed the gate
        self.pool = ChallengerPool()  # in-group selection: challengers with their paired evidence
        # pooled view: the last failure_window - 1 reflection steps' entries (evolve/prompt/failure_pool.py)
        self.window: list[dict] = []
        self.steps = 0  # reflection steps so far (a step's generation when the caller does not say)

    # -- lookups -------------------------------------------------------------------------
    def _index(self, cid: str) -> int | None:
        return next((i for i, e in enumerate(self.entries) if e.id == cid), None)

    def knows(self, cid: str) -> bool:
        """Whether ``cid`` is in the pool of candidates (the seed, promoted or validated ones)."""
        return self._index(cid) is not None

    @property
    def seed(self) -> Candidate:
        return Candidate(self.entries[0].components)

    def candidates(self) -> list[Candidate]:
        return [Candidate(e.components) for e in self.entries]

    def val_scores(self, candidate: Candidate) -> dict[str, float] | None:
        i = self._index(candidate.id)
        return None if i is None else self.entries[i].val_scores

    def frontier(self) -> dict[str, list[str]]:
        """task_id -> ids of the candidates with the best validation score on that task."""
        front = pareto_front([e.val_scores for e in self.entries])
        return {t: sorted(self.entries[i].id for i in s) for t, s in front.items()}

    @property
    def exhausted(self) -> bool:
        c = self.config
        return ((c.max_metric_calls is not None and self.metric_calls >= c.max_metric_calls)
                or (c.max_lm_cost_usd is not None and self.lm_cost >= c.max_lm_cost_usd))

    # -- the step ------------------------------------------------------------------------
    def select_parent(self, rng: random.Random) -> Candidate:
        """gepa's Pareto selection over validated candidates; the seed until something is validated."""
        scored = [i for i, e in enumerate(self.entries) if e.val_scores]
        if not scored:
            return self.seed
        i = select_from_front([e.val_scores for e in self.entries], rng)
        return Candidate(self.entries[i].components)

    def propose(self, parent: Candidate, rollouts: list[Rollout], rng: random.Random,
                generation: int | None = None) -> list[Proposal]:
        """Reflect on ``rollouts`` (failures first; the pooled view adds earlier steps' failures) and maybe
        merge; [] once a budget is spent. ``generation`` labels this step's records in the pool."""
        if self.exhausted:
            return []
        out: list[Proposal] = []
        merge = self._maybe_merge(rng)
        if merge is not None:
            out.append(merge)
        dataset = self._dataset(rollouts, rng, generation)
        if dataset.n_failures == 0 and self.config.max_demos <= 0:
            return out  # nothing to reflect on
        # 16-hex-digit id prefixes: enough to tell candidates apart, and keeps recorded requests small.
        avoid = (frozenset(e.id[:16] for e in self.entries) | frozenset(k[:16] for k in self.pending)
                 | frozenset(k[:16] for k in self.pool.ids()))
        drafts = self.reflector.reflect(parent, dataset, rng, self.config.proposals_per_step, avoid=avoid,
                                        rejected=dict(sorted(self.rejected.items())))
        for d in drafts:
            self.lm_cost += d.cost_usd
            if d.components is None:
                self.failed.append({"parent": parent.id, "kind": d.kind, "error": d.error,
                                    "lm_call_ids": d.lm_call_ids})
                continue
            out.append(self._pend(Proposal(Candidate(d.components), [parent.id], d.kind, d.lm_call_ids,
                                           d.rationale)))
        demo = self._demo_challenger(parent, dataset, rng, avoid | frozenset(p.candidate.id[:16] for p in out))
        return out + ([demo] if demo is not None else [])

    def _dataset(self, rollouts: list[Rollout], rng: random.Random, generation: int | None) -> ReflectiveDataset:
        """This step's reflective dataset under the config's view; the pooled view also moves the window."""
        c = self.config
        self.steps += 1
        if c.reflection_view == "generation":
            return build_reflective_dataset(rollouts, c, rng)
        gen = self.steps - 1 if generation is None else generation
        dataset, entry = build_pooled_dataset(rollouts, self.window, c, rng, gen)
        keep = c.failure_window - 1  # earlier steps kept beside the next one's own
        self.window = [*self.window, entry][-keep:] if keep else []
        return dataset

    def _demo_challenger(self, parent: Candidate, dataset: ReflectiveDataset, rng: random.Random,
                         avoid: frozenset[str]) -> Proposal | None:
        """``demo_challengers``: the parent with a fresh demonstration set, a challenger like any line."""
        c = self.config
        if not (c.demo_challengers and c.max_demos > 0 and dataset.demo_pool):
            return None
        got = demo_set_proposal(parent, dataset.demo_pool, c.max_demos, rng, c.max_component_chars)
        if got is None or Candidate(got[0]).id[:16] in avoid:
            return None
        return self._pend(Proposal(Candidate(got[0]), [parent.id], "swap-demos", [], got[1]))

    def _pend(self, p: Proposal) -> Proposal:
        self.pending[p.candidate.id] = {"components": p.candidate.components, "parents": p.parents,
                                        "proposed_by": p.proposed_by}
        return p

    def _maybe_merge(self, rng: random.Random) -> Proposal | None:
        c = self.config
        if not c.use_merge or self.merges_due <= 0 or len(self.merges_performed[0]) >= c.max_merges:
            return None
        got = try_merge([e.components for e in self.entries],
                        [[self._index(p) for p in e.parents if self._index(p) is not None] for e in self.entries],
                        [e.val_scores for e in self.entries], self.merges_performed, rng, c.max_lessons)
        if got is None:
            return None
        comps, i, j, anc = got
        self.merges_due -= 1
        ids = [self.entries[k].id for k in (i, j, anc)]
        if Candidate(comps).id in {e.id for e in self.entries}:
            return None
        return self._pend(Proposal(Candidate(comps), ids[:2], "merge", [],
                                   f"merge of {ids[0][:8]} and {ids[1][:8]} over common ancestor {ids[2][:8]}"))

    def accept(self, proposal: Proposal, proposal_scores: dict[str, float], parent_scores: dict[str, float],
               metric_calls: int | None = None) -> bool:
        """GEPA's minibatch gate: the proposal's score sum on the shared tasks must be strictly higher.

        ``metric_calls`` defaults to one per proposal score (pass the number of samples verified
        when several samples per task were averaged).
        """
        self.metric_calls += len(proposal_scores) if metric_calls is None else metric_calls
        shared = sorted(set(proposal_scores) & set(parent_scores))
        new = sum(proposal_scores[t] for t in shared)
        old = sum(parent_scores[t] for t in shared)
        ok = bool(shared) and new > old
        if proposal.kind == "merge":
            # gepa accepts a merge that is at least as good as its better parent on the subsample
            # (the loop passes the better parent's scores as ``parent_scores``).
            ok = bool(shared) and new >= old
        self.history.append({"candidate": proposal.candidate.id, "parents": proposal.parents, "kind": proposal.kind,
                             "minibatch": [round(old, 6), round(new, 6)], "accepted": ok})
        if not ok:
            info = self.pending.pop(proposal.candidate.id, None)
            if info is not None and proposal.kind != "merge":
                for line in self.added_lessons(proposal.candidate, proposal.parents):
                    self.rejected[line] = self.rejected.get(line, 0) + 1
        return ok

    def added_lessons(self, candidate: Candidate, parents: list[str]) -> list[str]:
        """The lesson lines ``candidate`` has that its first parent (when known) does not."""
        i = self._index(parents[0]) if parents else None
        before = set(split_lessons(self.entries[i].components.get("lessons", ""))) if i is not None else set()
        return [t for t in split_lessons(candidate.components.get("lessons", "")) if t not in before]

    def observe_val(self, candidate: Candidate, val_scores: dict[str, float], metric_calls: int | None = None,
                    parents: list[str] | None = None) -> None:
        """Add ``candidate`` (with its validation scores) to the pool and the per-task frontier."""
        self.metric_calls += len(val_scores) if metric_calls is None else metric_calls
        i = self._index(candidate.id)
        if i is None:
            info = self.pending.pop(candidate.id, None)
            if info is None and parents is None:
                raise EvolveError(f"prompt evolver: candidate {candidate.id[:12]} was never proposed")
            ps = parents if parents is not None else info["parents"]
            by = info["proposed_by"] if info else "reflection"
            self.entries.append(_Entry(dict(candidate.components), list(ps), by, dict(val_scores)))
            self.merges_due += 1
        else:
            e = self.entries[i]
            e.val_scores = {**(e.val_scores or {}), **val_scores}

    def promote(self, candidate: Candidate) -> None:
        """Make a pool member the incumbent that :meth:`current` returns, whatever the validation
        means say (a caller's acceptance rule, e.g. the loop's non-inferiority rule)."""
        if self._index(candidate.id) is None:
            raise EvolveError(f"prompt evolver: cannot promote {candidate.id[:12]}: not in the pool")
        self.incumbent = candidate.id

    def current(self) -> Candidate:
        """The promoted incumbent if any; else the best mean validation score (ties: the older
        candidate); the seed before any validation."""
        if self.incumbent is not None:
            return Candidate(self.entries[self._index(self.incumbent)].components)
        best, best_score = 0, float("-inf")
        for i, e in enumerate(self.entries):
            if e.val_scores and mean(e.val_scores) > best_score:
                best, best_score = i, mean(e.val_scores)
        return Candidate(self.entries[best].components)

    # -- in-group selection (see evolve.prompt.challengers / evidence) -----------------------
    def admit(self, proposal: Proposal, generation: int) -> bool:
        """Put a proposal into the challenger pool (False, and forgotten, when the pool is full)."""
        ch = Challenger(dict(proposal.candidate.components), list(proposal.parents), proposal.kind, generation,
                        self.current().id)
        if self._index(ch.id) is None and self.pool.add(ch):
            return True
        self.pending.pop(proposal.candidate.id, None)
        return False

    def resolve(self, challenger: Challenger, generation: int, rule: EvidenceRule) -> None:
        """Act on a challenger's decision: a promoted one joins the pool of candidates (its in-group
        task scores stand in for validation scores, so merges work as before) and becomes the
        incumbent; a retired one is dropped, and the lessons it added count as rejected."""
        decision = challenger.evidence.decision
        if decision == "active":
            return
        self.pool.close(challenger.id, generation, rule)
        self.history.append({"candidate": challenger.id, "parents": challenger.parents, "kind": challenger.kind,
                             "evidence": challenger.evidence.summary(rule), "accepted": decision == "promoted"})
        if decision == "promoted":
            self.observe_val(challenger.candidate, challenger.scores, metric_calls=0, parents=challenger.parents)
            self.promote(challenger.candidate)
            self.pool.reset(challenger.id)
            return
        self.pending.pop(challenger.id, None)
        if challenger.kind != "merge" and challenger.parents:
            for line in self.added_lessons(challenger.candidate, challenger.parents):
                self.rejected[line] = self.rejected.get(line, 0) + 1

    # -- persistence ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "version": 1, "config": self.config.to_dict(),
            "entries": [{"components": e.components, "parents": e.parents, "proposed_by": e.proposed_by,
                         "val_scores": e.val_scores} for e in self.entries],
            "pending": self.pending, "merges_performed": [[list(x) for x in self.merges_performed[0]],
                                                          [[a, b, list(c)] for a, b, c in self.merges_performed[1]]],
            "merges_due": self.merges_due, "metric_calls": self.metric_calls, "lm_cost": self.lm_cost,
            "failed": self.failed, "history": self.history, "rejected": self.rejected,
            "incumbent": self.incumbent, "challengers": self.pool.state_dict(),
            **({"window": self.window, "steps": self.steps} if self.config.reflection_view == "pooled" else {}),
        }

    @classmethod
    def from_state_dict(cls, d: dict, reflector: Reflector,
                        config: PromptEvolutionConfig | None = None) -> PromptEvolver:
        if d.get("version") != 1:
            raise EvolveError(f"prompt evolver state: unsupported version {d.get('version')!r}")
        cfg = config or PromptEvolutionConfig.from_dict({**RECORDED_ABSENT_MEANT, **d["config"]})
        entries = [_Entry(dict(e["components"]), list(e["parents"]), e["proposed_by"], e["val_scores"])
                   for e in d["entries"]]
        ev = cls(cfg, reflector, Candidate(entries[0].components))
        ev.entries = entries
        ev.pending = dict(d["pending"])
        m0, m1 = d["merges_performed"]
        ev.merges_performed = ([tuple(x) for x in m0], [(a, b, tuple(c)) for a, b, c in m1])
        ev.merges_due, ev.metric_calls, ev.lm_cost = d["merges_due"], d["metric_calls"], d["lm_cost"]
        ev.failed, ev.history = list(d["failed"]), list(d["history"])
        ev.rejected = dict(d.get("rejected", {}))
        ev.incumbent = d.get("incumbent")
        ev.pool = ChallengerPool.from_state_dict(d.get("challengers"))
        ev.window, ev.steps = list(d.get("window", [])), int(d.get("steps", 0))
        return ev

