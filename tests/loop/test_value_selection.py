"""Value-of-look selection (``[loop.selection] type = "value"``, evolve/loop/selection/value.py): the
valuation's pure functions, the unequal-share pairing, the two-look retirement, the config, and one
generation of the real loop (real tiny model, real sandbox, real SQLite) with a share below half."""

from __future__ import annotations

import numpy as np
import pytest

from evolve.errors import ConfigError
from evolve.gym.notes import DISTRACTORS
from evolve.loop.config import LoopConfig
from evolve.loop.selection.configs import InGroupSelection, ValueSelection
from evolve.loop.selection.in_group import evidence_rule, first_per_task, paired_differences
from evolve.loop.selection.value import (
    challenger_share,
    displaced,
    look_value,
    pool_evidence,
    pool_prior_mean,
)
from evolve.prompt.challengers import Challenger, ChallengerPool
from evolve.prompt.evidence import Evidence, EvidenceRule
from evolve.prompt.gate_rule import signflip_pvalue

RULE = EvidenceRule()  # alpha 0.1 over 6 looks, as shipped
SD = ValueSelection().prior_sd
# +0.02 a pair over 6 looks of 8 (the seed-20 kind: a few more small wins than losses): tight, near zero
NEAR_NULL = ([0.25, 0.0, 0.0, 0.0, 0.25, 0.0, -0.25, 0.0] * 4 + [0.25, 0.0, 0.0, 0.0, -0.25, 0.0, 0.25, 0.0] * 2)
GOOD_LOOK = [0.25, 0.25, 0.0, 0.0, 0.5, 0.0, 0.25, 0.0]  # the boundary lesson's kind of first look


def test_a_look_is_worth_more_at_an_untried_line_than_at_a_tight_near_null_one():
    """The diagnosis (docs/ablation.md): Thompson sampling gave the looks to a line at +0.02-0.04 with
    a tight posterior. One more look almost never makes such a line pass; an untried one might, and a
    line with one good look is the likeliest of all."""
    untried = look_value([], 8, RULE, 0.0, SD)
    near_null = look_value(NEAR_NULL, 8, RULE, 0.0, SD)
    good = look_value(GOOD_LOOK, 8, RULE, 0.0, SD)
    assert near_null < untried < good
    assert good > 3 * untried and untried > 3 * near_null
    # negative pool evidence lowers an untried line's worth (its prior mean), never raises it
    assert look_value([], 8, RULE, -0.05, SD) < untried
    assert look_value([], 8, RULE, -0.05, SD) > near_null  # still above a near-null line


def test_the_valuation_tracks_the_sign_flip_test_it_approximates():
    """Where the exact test would promote after one more look of the same differences, the look is worth
    most of the line's gain; where it could not, nothing."""
    strong = [0.5, 0.25, 0.25, 0.0, 0.5, 0.25, 0.0, 0.25]
    assert signflip_pvalue(strong * 2) <= RULE.alpha / RULE.looks
    losing = [-0.25, -0.5, 0.0, -0.25, 0.0, -0.25, 0.0, 0.0]
    assert look_value(strong, 8, RULE, 0.0, SD) > 0.1  # mean +0.25, about 3/4 likely to pass
    assert look_value(losing, 8, RULE, 0.0, SD) < 0.001


def test_the_share_shrinks_while_the_pool_evidence_is_negative():
    assert challenger_share(0.0, 0, [], 0.0, SD, 4, 1) == 4  # no evidence yet: half the group
    assert challenger_share(-4.0, 48, [], pool_prior_mean(-4.0, 48, SD), SD, 4, 1) == 1  # clearly negative
    mid = challenger_share(-0.8, 24, [], pool_prior_mean(-0.8, 24, SD), SD, 4, 1)
    assert 1 < mid < 4
    assert challenger_share(-4.0, 48, [], -0.05, SD, 4, 2) == 2  # never below min_share
    # a line whose own evidence is good keeps its half even in a pool that has not helped
    assert challenger_share(-4.0, 48, GOOD_LOOK * 2, -0.05, SD, 4, 1) == 4


def _challenger(line: str, diffs: list[float], looks: int, incumbent: str = "inc") -> Challenger:
    c = Challenger({"system": "s", "lessons": line}, [incumbent], "add-lesson", 0, incumbent)
    per = len(diffs) // looks if looks else 0
    c.evidence = Evidence(list(diffs), [per] * looks)
    return c


def test_a_full_pool_displaces_a_measured_near_null_line_not_an_unlucky_or_promising_one():
    pool = ChallengerPool(3)
    near, unlucky, good = (_challenger("a", NEAR_NULL, 6), _challenger("b", [-0.25] + [0.0] * 7, 1),
                           _challenger("c", GOOD_LOOK * 2, 2))
    for c in (near, unlucky, good):
        assert pool.add(c)
    values = {c.id: look_value(c.evidence.diffs, 8, RULE, 0.0, SD) for c in pool.active}
    untried = look_value([], 8, RULE, 0.0, SD)
    assert displaced(pool, values, untried, after_looks=2) is near
    # with the near-null line gone, the unlucky one (one look) stays and the good one is worth more
    pool.active.remove(near)
    assert displaced(pool, values, untried, after_looks=2) is None


def test_pool_evidence_counts_decided_lines_against_the_same_incumbent_only():
    pool = ChallengerPool(4)
    pool.add(_challenger("a", [0.25, -0.5], 1))
    pool.add(_challenger("b", [1.0], 1, incumbent="old"))
    pool.decided.append({"id": "x", "incumbent": "inc", "evidence": {"n": 8, "mean_diff": -0.125}})
    pool.decided.append({"id": "y", "incumbent": "old", "evidence": {"n": 8, "mean_diff": 0.5}})
    assert pool_evidence(pool, "inc") == pytest.approx((-1.25, 10))
    assert pool_prior_mean(-1.25, 10, SD) < 0
    assert pool_prior_mean(5.0, 10, SD) == 0.0  # one good line does not raise the prior of the next


def test_losing_is_retired_from_the_second_look_under_value_only():
    value, shipped = evidence_rule(ValueSelection()), evidence_rule(InGroupSelection())
    bad_look = [-0.5, -0.25, -0.5, 0.0, -0.25, -0.5, -0.25, 0.0]
    first, first_shipped = Evidence(), Evidence()
    assert shipped.decide(first_shipped, bad_look) == "retired-losing"
    assert value.decide(first, bad_look) == "active"  # not after one unlucky look
    assert value.decide(first, bad_look) == "retired-losing"


def test_unequal_shares_pair_k_samples_with_k_and_stay_symmetric_under_the_null():
    """With 1 challenger sample against 7 of the incumbent's, comparing with all 7 would make a line that
    changes nothing look better on easy tasks (mostly small positive differences, a few large negative:
    the sign-flip test would promote it far above its stated rate); k against k is symmetric."""
    from evolve.rollout import Rollout
    from evolve.verification.types import VerifyResult

    rng = np.random.default_rng(0)

    def rolls(prompt, task, passed):
        return [Rollout(task, 0, i, prompt, "w", [], "", "c", result=VerifyResult(task, float(p), bool(p)),
                        reward=float(p)) for i, p in enumerate(passed)]

    tasks = [f"t{i}" for i in range(4000)]
    inc, ch = [], []
    for t in tasks:  # null: both prompts draw from the same rate
        p = rng.uniform(0.6, 0.95)
        inc += rolls("I", t, rng.random(7) < p)
        ch += rolls("C", t, rng.random(1) < p)
    assert len(first_per_task(inc, 1)) == len(tasks)
    paired, _ = paired_differences(first_per_task(inc, 1), ch)
    skew_paired = np.mean(np.array(paired) > 0) - np.mean(np.array(paired) < 0)
    assert abs(skew_paired) < 0.03
    unpaired, _ = paired_differences(inc, ch)  # 1 vs 7: most differences are small positives
    assert np.mean(np.array(unpaired) > 0) - np.mean(np.array(unpaired) < 0) > 0.3


def test_the_value_config_has_its_own_keys():
    def selection(table: dict):
        return LoopConfig.from_dict({"selection": table}, source="t").selection

    assert selection({"type": "value"}) == ValueSelection()
    with pytest.raises(ConfigError, match="evict_below.*not a setting of type 'value'"):
        selection({"type": "value", "evict_below": 0.3})
    with pytest.raises(ConfigError, match="min_share"):
        selection({"type": "value", "min_share": 0})


def test_value_selection_in_the_real_loop_shares_and_pairs(tiny_model_dir, tmp_path):
    """One generation with a pool whose evidence is clearly negative: the challenger gets min_share of each
    task's group, its paired differences compare that many samples of each prompt, and its losing test waits."""
    from tests.loop.test_in_group import run, seed_challenger, start

    session, _ = start(tmp_path, selection={"type": "value", "challenger_pool": 2, "min_share": 1})
    ch = seed_challenger(session, DISTRACTORS[0])
    inc = session.ctx.evolver.current().id
    session.ctx.evolver.pool.decided.append({"id": "x", "incumbent": inc, "kind": "add-lesson", "born": 0,
                                             "decided_at": 0, "evidence": {"n": 64, "mean_diff": -0.1}})
    try:
        outs = run(session, 1)
    finally:
        session.close()
    rec = outs[0].metrics["challengers"][0]
    train = [r for r in outs[0].rollouts if r.purpose == "train"]
    per_task = {}
    for r in train:
        if r.prompt_version == ch.id:
            per_task[r.task_id] = per_task.get(r.task_id, 0) + 1
    assert rec["id"] == ch.id and set(per_task.values()) == {1}
    assert rec["samples"] == len(per_task) and rec["n"] == len(per_task)
    assert rec["decision"] in ("active", "promoted")  # never retired-losing after one look
    assert outs[0].metrics["selection"] == "value"
