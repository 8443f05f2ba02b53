"""The gate's promotion rule (evolve/prompt/gate_rule.py and the loop's ``gate_one``): exact
p-values against a slow reference, no promotion on a tie, the stated rate on lines that change
nothing, power on a real lesson, and in the loop's gate a near-tie that no longer switches the
prompt through the pool's validation means."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from evolve.loop.config import LoopConfig
from evolve.loop.selection.configs import GateSelection
from evolve.loop.selection.gate import GateParent, gate_one
from evolve.prompt import Candidate, PromptEvolutionConfig, PromptEvolver, make_reflector
from evolve.prompt.evolver import Proposal
from evolve.prompt.gate_rule import gate_passes, signflip_pvalue
from tests.prompt.prompt_helpers import rollout

LESSONS = str(Path(__file__).resolve().parents[2] / "prompts" / "lessons")
SEED = Candidate({"system": "Write a Python function that solves the task.", "lessons": ""})


def slow_pvalue(d, margin=0.0):
    """Reference: loop over every sign pattern, in plain Python."""
    d = [x - margin for x in d]
    obs, hits, total = sum(d), 0, 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        total += 1
        hits += sum(s * abs(x) for s, x in zip(signs, d, strict=True)) >= obs - 1e-12
    return hits / total


def test_pvalue_matches_the_slow_reference():
    rng = np.random.default_rng(0)
    for n in (1, 3, 7, 12):
        for _ in range(5):
            d = (rng.integers(0, 5, n) / 4 - rng.integers(0, 5, n) / 4).tolist()
            assert signflip_pvalue(d) == pytest.approx(slow_pvalue(d), abs=1e-12)
            assert signflip_pvalue(d, 0.1) == pytest.approx(slow_pvalue(d, 0.1), abs=1e-12)
    assert signflip_pvalue([0.25] * 5) == pytest.approx(1 / 32)  # every task better: the smallest p


def test_monte_carlo_pvalue_uses_the_seeded_draws_that_runs_recorded():
    """Beyond EXACT_MAX tasks the p-value comes from 20,000 seeded sign patterns: the same draws as
    ``default_rng(0).choice((1.0, -1.0))``, for every size, in any order of sizes (decisions replay)."""
    rng = np.random.default_rng(3)
    for n in (17, 40, 17, 23, 61, 40):  # sizes revisited after others: the cache must not change them
        d = rng.choice([-0.5, -0.25, 0.25, 0.5, 0.75], n).tolist()  # no zeros: all n tasks count
        ref = np.random.default_rng(0).choice((1.0, -1.0), size=(20000, n)) @ np.abs(d) >= sum(d) - 1e-12
        assert signflip_pvalue(d) == (1 + ref.sum()) / (1 + ref.size)


def test_a_tie_never_passes():
    scores = {f"t{i}": v for i, v in enumerate([0.5, 0.25, 1.0, 0.0])}
    ok, ev = gate_passes(dict(scores), dict(scores), alpha=0.99)
    assert not ok and ev["mean_diff"] == 0.0
    assert signflip_pvalue([0.0] * 4) == 1.0


def val_scores(rng, effect=0.0, share=0.5, tasks=12, samples=2):
    p = rng.uniform(0.0, 0.8, tasks)
    q = np.clip(p + np.where(rng.random(tasks) < share, effect, 0.0), 0, 1)
    parent = {f"t{i}": rng.binomial(samples, p[i]) / samples for i in range(tasks)}
    prop = {f"t{i}": rng.binomial(samples, q[i]) / samples for i in range(tasks)}
    return prop, parent


def pass_rate(alpha, effect=0.0, trials=2000, seed=1, **kw):
    rng = np.random.default_rng(seed)
    return float(np.mean([gate_passes(*val_scores(rng, effect, **kw), alpha)[0] for _ in range(trials)]))


def strict_pass_rate(effect=0.0, trials=2000, seed=1, **kw):
    """The deleted "strict" rule (mean difference > 0 alone), written out as the reference."""
    rng = np.random.default_rng(seed)
    return float(np.mean([np.mean([a - b for a, b in zip(*(list(d.values()) for d in val_scores(rng, effect, **kw)),
                                                          strict=True)]) > 0 for _ in range(trials)]))


@pytest.mark.parametrize("alpha", [0.05, 0.2])
@pytest.mark.parametrize("shape", [{"tasks": 12, "samples": 2}, {"tasks": 16, "samples": 4}])
def test_distractors_pass_no_more_often_than_the_stated_rate(alpha, shape):
    """A line that changes nothing: proposal and parent share each task's success probability."""
    rate = pass_rate(alpha, **shape)
    assert rate <= alpha
    strict = strict_pass_rate(**shape)
    assert rate < strict <= 0.5  # the deleted strict rule's stated rate was 1/2; the test brings it down


def test_a_real_lesson_passes_often():
    # the boundary lesson on the hard tier: about +0.2 on half of the tasks
    assert pass_rate(0.2, effect=0.4, tasks=16, samples=4, trials=500) >= 0.8


# ---- the loop's gate: the rule is what switches the prompt, nothing else ------------------------

def _scores_rollouts(scores: dict[str, list[bool]], prompt_id: str):
    out = []
    for t, passes in scores.items():
        for i, ok in enumerate(passes):
            r = rollout(t, ok, sample_index=i)
            r.prompt_version = prompt_id
            out.append(r)
    return out


def _run_gate(val_parent, val_prop):
    sel = GateSelection(minibatch_samples=2, val_samples=2)
    cfg = LoopConfig(selection=sel)
    ev = PromptEvolver(PromptEvolutionConfig(lessons_dir=LESSONS), make_reflector(PromptEvolutionConfig(
        lessons_dir=LESSONS)), SEED)
    prop = Proposal(SEED.with_component("lessons", "Use clear variable names."), [SEED.id], "add-lesson")
    ev._pend(prop)
    ctx = SimpleNamespace(config=cfg, evolver=ev, val_tasks=["v"])
    mb_parent = {"m0": [False, False], "m1": [True, False]}
    mb_prop = {"m0": [True, False], "m1": [True, False]}  # passes the strict minibatch gate

    def evaluate(cand, task_list, n, seed):  # the sampled outcomes, fixed by the test
        if task_list == ["v"]:
            return _scores_rollouts(val_prop if cand.id == prop.candidate.id else val_parent, cand.id)
        return _scores_rollouts(mb_prop if cand.id == prop.candidate.id else mb_parent, cand.id)

    from evolve.loop.rollouts import task_scores

    parent = GateParent(SEED, task_scores(_scores_rollouts(mb_parent, SEED.id)))
    records = []
    seeds = SimpleNamespace(reflect=7)
    gate_one(ctx, sel, prop, parent, ["m0", "m1"], {SEED.id: []}, evaluate, seeds, records)
    return ev, prop, records[-1]


def test_gate_keeps_the_parent_on_a_tie_and_on_a_near_tie():
    same = {f"v{i}": [i % 2 == 0, i % 3 == 0] for i in range(12)}
    ev, prop, rec = _run_gate(same, dict(same))
    assert rec["accepted"] and not rec["gate"]["promoted"]  # minibatch passed, validation tied
    assert ev.current().id == SEED.id
    near = dict(same, v1=[True, True])  # one more success out of 24: mean higher, p = 1/2
    ev, prop, rec = _run_gate(same, near)
    assert rec["gate"]["mean_diff"] > 0 and not rec["gate"]["promoted"]
    assert ev.current().id == SEED.id  # the proposal's higher pool mean does not switch the prompt


def test_gate_promotes_a_clear_win():
    parent = {f"v{i}": [False, False] for i in range(12)}
    better = {f"v{i}": [True, i < 6] for i in range(12)}
    ev, prop, rec = _run_gate(parent, better)
    assert rec["gate"]["promoted"] and rec["gate"]["p"] <= 0.2
    assert ev.current().id == prop.candidate.id
