"""The stepwise evolver: gate, pool, Pareto frontier, merge, budgets, persistence, replay.

Scores here come from a fixed per-task table (which lesson fixes which task), standing in
for rollouts + verifier so the engine's bookkeeping can be checked exactly; the real
model and verifier are exercised in test_gain.py.
"""

import json
import random
from pathlib import Path

import pytest
from prompt_helpers import div_failure, empty_failure

from evolve.errors import EvolveError
from evolve.prompt import (
    Candidate,
    MemoryRecorder,
    PromptEvolutionConfig,
    PromptEvolver,
    Proposal,
    ReplayRecorder,
    make_reflector,
)
from evolve.prompt.lessons import split_lessons
from evolve.prompt.pareto import from_merge_view, merge_view

LESSONS = str(Path(__file__).resolve().parents[2] / "prompts" / "lessons")
SEED = Candidate({"system": "Write a Python function that solves the task.", "lessons": ""})
FIXES = {"e1": "Handle the empty list.", "e2": "Handle the empty list.", "d1": "Use // for integer division."}


def score(c: Candidate, tasks) -> dict[str, float]:
    lines = split_lessons(c.components.get("lessons", ""))
    return {t: 1.0 if FIXES.get(t) in lines else 0.0 for t in tasks}


def rollouts_for(c: Candidate):
    s = score(c, FIXES)
    out = []
    for t, v in s.items():
        if not v:
            out += [empty_failure(t, i) if t.startswith("e") else div_failure(t, i) for i in range(2)]
    return out


def evolve(cfg, reflector, steps=6, seed=0):
    ev = PromptEvolver(cfg, reflector, SEED)
    ev.observe_val(SEED, score(SEED, FIXES))
    rng = random.Random(seed)
    for _ in range(steps):
        parent = ev.select_parent(rng)
        for p in ev.propose(parent, rollouts_for(parent), rng):
            if ev.accept(p, score(p.candidate, FIXES), score(Candidate(ev_components(ev, p.parents[0])), FIXES)):
                ev.observe_val(p.candidate, score(p.candidate, FIXES))
    return ev


def ev_components(ev, cid):
    return next(c.components for c in ev.candidates() if c.id == cid)


def test_accept_is_strict_on_the_shared_tasks():
    ev = PromptEvolver(PromptEvolutionConfig(lessons_dir=LESSONS), make_reflector(
        PromptEvolutionConfig(lessons_dir=LESSONS)), SEED)
    p = Proposal(SEED.with_component("lessons", "x"), [SEED.id], "add-lesson")
    assert not ev.accept(p, {"a": 1.0, "b": 0.0}, {"a": 0.0, "b": 1.0})
    assert ev.accept(p, {"a": 1.0, "b": 0.5, "zz": 0.0}, {"a": 1.0, "b": 0.0})
    assert not ev.accept(p, {"a": 1.0}, {"b": 0.0})  # nothing shared: no evidence
    assert ev.metric_calls == 6
    with pytest.raises(EvolveError, match="never proposed"):
        ev.observe_val(Candidate({"system": "other"}), {"a": 1.0})


def test_offline_evolution_finds_the_lessons_and_tracks_the_frontier():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, proposals_per_step=3, max_lessons=3)
    ev = evolve(cfg, make_reflector(cfg), steps=8)
    best = ev.current()
    assert sum(score(best, FIXES).values()) == 3.0
    assert set(split_lessons(best.components["lessons"])) >= {"Handle the empty list.",
                                                              "Use // for integer division."}
    front = ev.frontier()
    assert best.id in front["d1"] and best.id in front["e1"]
    assert all(h["accepted"] == (h["minibatch"][1] > h["minibatch"][0]) for h in ev.history
               if h["kind"] != "merge")


def test_merge_view_round_trips_and_orders_lessons():
    a = {"system": "S", "lessons": "A\nB"}
    assert merge_view(a) == {"system": "S", "lessons::A": "1", "lessons::B": "1"}
    assert from_merge_view(merge_view(a), [a], 4) == a
    view = {"system": "S", "lessons::B": "1", "lessons::C": "1", "lessons::A": ""}
    assert from_merge_view(view, [a, {"lessons": "C\nB"}], 4)["lessons"] == "B\nC"


def test_merge_proposal_from_two_branches_of_a_common_ancestor():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, use_merge=True)
    ev = PromptEvolver(cfg, make_reflector(cfg), SEED)
    ev.observe_val(SEED, {"e1": 0.0, "d1": 0.0})
    a = SEED.with_component("lessons", "Handle the empty list.")
    b = SEED.with_component("lessons", "Use // for integer division.")
    ev.observe_val(a, {"e1": 1.0, "d1": 0.0}, parents=[SEED.id])
    ev.observe_val(b, {"e1": 0.0, "d1": 1.0}, parents=[SEED.id])
    assert ev.frontier() == {"d1": [b.id], "e1": [a.id]}
    merges = [p for p in ev.propose(a, [], random.Random(0)) if p.kind == "merge"]
    assert len(merges) == 1 and sorted(merges[0].parents) == sorted([a.id, b.id])
    assert set(split_lessons(merges[0].candidate.components["lessons"])) == {
        "Handle the empty list.", "Use // for integer division."}
    assert ev.accept(merges[0], {"e1": 1.0, "d1": 1.0}, {"e1": 1.0, "d1": 0.0})
    ev.observe_val(merges[0].candidate, {"e1": 1.0, "d1": 1.0})
    assert ev.current().id == merges[0].candidate.id


def test_pareto_parent_selection_samples_only_non_dominated_candidates():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS)
    ev = PromptEvolver(cfg, make_reflector(cfg), SEED)
    assert ev.select_parent(random.Random(0)).id == SEED.id
    ev.observe_val(SEED, {"e1": 0.0, "d1": 0.0})
    a = SEED.with_component("lessons", "A")
    b = SEED.with_component("lessons", "B")
    ev.observe_val(a, {"e1": 1.0, "d1": 0.0}, parents=[SEED.id])
    ev.observe_val(b, {"e1": 0.0, "d1": 1.0}, parents=[SEED.id])
    picks = {ev.select_parent(random.Random(s)).id for s in range(20)}
    assert picks == {a.id, b.id}


def test_budget_stops_proposals():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, max_metric_calls=4)
    ev = PromptEvolver(cfg, make_reflector(cfg), SEED)
    assert ev.propose(SEED, rollouts_for(SEED), random.Random(0))
    ev.observe_val(SEED, {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0})
    assert ev.exhausted and ev.propose(SEED, rollouts_for(SEED), random.Random(0)) == []


def test_state_dict_is_json_and_resumes_identically():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, proposals_per_step=2)
    ev = evolve(cfg, make_reflector(cfg), steps=3)
    d = json.loads(json.dumps(ev.state_dict()))
    ev2 = PromptEvolver.from_state_dict(d, make_reflector(cfg))
    assert ev2.state_dict() == ev.state_dict()
    rng1, rng2 = random.Random(9), random.Random(9)
    p1 = ev.propose(ev.select_parent(rng1), rollouts_for(ev.current()), rng1)
    p2 = ev2.propose(ev2.select_parent(rng2), rollouts_for(ev2.current()), rng2)
    assert [p.candidate.id for p in p1] == [p.candidate.id for p in p2]


def test_replay_from_recorded_calls_gives_identical_candidates():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, proposals_per_step=2)
    rec = MemoryRecorder()
    live = evolve(cfg, make_reflector(cfg, rec), steps=5, seed=3)
    assert rec.calls and all(c.model == "offline" for c in rec.calls)
    replay = evolve(cfg, make_reflector(cfg, ReplayRecorder(rec)), steps=5, seed=3)
    assert [c.id for c in replay.candidates()] == [c.id for c in live.candidates()]
    assert replay.current().id == live.current().id


class PricedReflector:
    """A Reflector implementation charging a fixed price per draft (what a paid LM reports)."""

    name = "priced"

    def __init__(self, inner, price):
        self.inner, self.price = inner, price

    def reflect(self, parent, dataset, rng, n, avoid=frozenset(), rejected=None):
        drafts = self.inner.reflect(parent, dataset, rng, n, avoid, rejected)
        for d in drafts:
            d.cost_usd = self.price
        return drafts


def test_lm_cost_budget_stops_reflection():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, proposals_per_step=2, max_lm_cost_usd=0.05)
    ev = PromptEvolver(cfg, PricedReflector(make_reflector(cfg), 0.02), SEED)
    assert len(ev.propose(SEED, rollouts_for(SEED), random.Random(0))) == 2
    assert ev.lm_cost == pytest.approx(0.04) and not ev.exhausted
    ev.propose(SEED, rollouts_for(SEED), random.Random(1))
    assert ev.exhausted and ev.propose(SEED, rollouts_for(SEED), random.Random(2)) == []


def test_rejected_lessons_are_down_weighted_in_later_retrieval():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, proposals_per_step=1)
    ev = PromptEvolver(cfg, make_reflector(cfg), SEED)
    (p,) = ev.propose(SEED, rollouts_for(SEED), random.Random(0))
    (line,) = split_lessons(p.candidate.components["lessons"])
    assert not ev.accept(p, {"e1": 0.0}, {"e1": 1.0})
    assert ev.rejected == {line: 1}
    assert PromptEvolver.from_state_dict(ev.state_dict(), make_reflector(cfg)).rejected == {line: 1}
    lib = make_reflector(cfg).library
    feats = __import__("collections").Counter({t: 3 for t in lib.get(line).tags})
    plain = dict((x.text, s) for x, s in lib.retrieve(feats, random.Random(0), k=50))
    damped = dict((x.text, s) for x, s in lib.retrieve(feats, random.Random(0), k=50, weight={line: 0.5}))
    assert damped[line] == plain[line] / 2
