"""The challenger promotion rule (evolve.prompt.evidence): its stated error rate on lines that
change nothing, its power on a real lesson, its bounds, and the pool that schedules challengers.

The trials are synthetic paired data shaped like the loop's: per generation 8 tasks of varying
difficulty, the incumbent and the challenger each get 4 Bernoulli samples per task; a distractor
has exactly the incumbent's success probability. The real-loop check is in tests/loop/test_in_group.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from evolve.prompt.challengers import Challenger, ChallengerPool
from evolve.prompt.evidence import Evidence, EvidenceRule, lower_bound, rejects_at_most, upper_bound


def trial(rng, rule, effect=0.0, share=1.0, generations=30, tasks=8, a=4, b=4, coupled=False):
    """``coupled``: common random numbers, as the loop samples (a = b): one uniform per sample
    decides both prompts' outcomes, so a line that changes nothing gives d = 0 and a lesson's
    differences are mostly 0 or positive."""
    ev = Evidence()
    for _ in range(generations):
        diffs = []
        for _ in range(tasks):
            p = rng.uniform(0.0, 0.7)
            q = min(1.0, max(0.0, p + (effect if rng.random() < share else 0.0)))
            if coupled:
                u = rng.random(a)
                diffs.append(float(np.mean(u < q) - np.mean(u < p)))
            else:
                diffs.append(rng.binomial(b, q) / b - rng.binomial(a, p) / a)
        if rule.decide(ev, diffs) != "active":
            break
    return ev


def test_distractors_are_promoted_no_more_often_than_alpha():
    rule = EvidenceRule(alpha=0.05, cap=240)
    rng = np.random.default_rng(0)
    trials = [trial(rng, rule) for _ in range(600)]
    rate = np.mean([t.decision == "promoted" for t in trials])
    assert rate <= rule.alpha  # the stated error rate, over up to 30 looks each
    # and it is not vacuous: a looser alpha lets more chance winners through
    loose = EvidenceRule(alpha=0.3, cap=240)
    rng = np.random.default_rng(0)
    assert np.mean([trial(rng, loose).decision == "promoted" for _ in range(600)]) > rate


def test_a_real_lesson_is_promoted():
    """The loop's regime: common random numbers, the default rule (0.1 over 6 looks)."""
    rule = EvidenceRule()
    rng = np.random.default_rng(1)
    trials = [trial(rng, rule, effect=0.32, share=0.5, coupled=True) for _ in range(100)]
    assert np.mean([t.decision == "promoted" for t in trials]) >= 0.9  # measured: 1.0 (0.85 with independent samples)
    assert np.median([len(t.per_generation) for t in trials if t.decision == "promoted"]) <= 3  # measured: 2


def test_a_harmful_line_is_retired_as_losing():
    rule = EvidenceRule(alpha=0.05)
    rng = np.random.default_rng(2)
    trials = [trial(rng, rule, effect=-0.3) for _ in range(50)]
    assert np.mean([t.decision == "retired-losing" for t in trials]) >= 0.9


def test_undecided_challenger_retires_at_the_cap():
    rule = EvidenceRule(cap=16)
    ev = Evidence()
    assert rule.decide(ev, [0.0] * 8) == "active"
    assert rule.decide(ev, [0.0] * 8) == "retired-cap"
    assert rule.decide(ev, [1.0] * 8) == "retired-cap"  # decided is final; nothing more is added
    assert ev.n == 16


def test_bounds_cover_the_true_mean_and_bracket_the_sample_mean():
    rng = np.random.default_rng(3)
    miss = 0
    for _ in range(300):
        d = np.clip(rng.normal(0.1, 0.4, 60), -1, 1)
        true = float(np.mean(np.clip(rng.normal(0.1, 0.4, 200000), -1, 1)))
        lo, hi = lower_bound(d, 0.1), upper_bound(d, 0.1)
        assert lo <= float(np.mean(d)) <= hi
        miss += not (lo <= true)
    assert miss / 300 <= 0.1


def test_margin_makes_promotion_harder():
    d = [0.15] * 40
    assert rejects_at_most(d, 0.0, 0.05)
    assert not rejects_at_most(d, 0.2, 0.05)


def test_random_reward_control_can_promote_at_about_the_error_rate():
    """Under the random-reward control both arms get independent Bernoulli(0.5) rewards: a
    challenger can be promoted by chance, and no more often than alpha."""
    rule = EvidenceRule(alpha=0.05, cap=240, looks=6)
    rng = np.random.default_rng(4)
    promoted = 0
    for _ in range(1500):
        ev = Evidence()
        for _ in range(30):
            d = (rng.binomial(4, 0.5, 8) / 4 - rng.binomial(4, 0.5, 8) / 4).tolist()
            if rule.decide(ev, d) != "active":
                break
        promoted += ev.decision == "promoted"
    assert 0 < promoted / 1500 <= rule.alpha


def _ch(text: str, incumbent: str = "inc") -> Challenger:
    return Challenger({"system": "s", "lessons": text}, ["inc"], "add-lesson", 1, incumbent)


def test_pool_cap_dedup_and_reset():
    rule = EvidenceRule()
    pool = ChallengerPool(cap=2)
    a, b = _ch("a"), _ch("b")
    assert pool.add(a) and pool.add(b)
    assert not pool.add(_ch("c"))  # full
    assert pool.room == 0
    rule.decide(a.evidence, [-0.5] * 8)  # a is losing
    assert a.evidence.decision == "retired-losing"
    pool.close(a.id, 3, rule)
    assert not pool.add(_ch("a"))  # a decided challenger is not re-admitted
    pool.reset("new")
    assert b.incumbent == "new" and b.evidence.n == 0 and b.resets == 1
    again = ChallengerPool.from_state_dict(pool.state_dict())
    assert again.state_dict() == pool.state_dict()


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_config_rejects_bad_alpha(alpha):
    from evolve.errors import ConfigError
    from evolve.loop.config import LoopConfig

    with pytest.raises(ConfigError, match="promote_alpha"):
        LoopConfig.from_dict({"selection": {"type": "in_group", "promote_alpha": alpha}})


# ---- allocation: Thompson sampling and eviction (evict_below) --------------------------------------

def test_gaussian_posterior_matches_a_slow_grid_reference():
    from evolve.prompt.evidence import gaussian_posterior, prob_better

    rng = np.random.default_rng(5)
    grid = np.linspace(-1.5, 1.5, 30001)
    for n in (0, 1, 8, 40):
        d = np.clip(rng.normal(0.05, 0.35, n), -1, 1)
        logp = -grid**2 / (2 * 0.1**2) - sum((x - grid) ** 2 for x in d) / (2 * 0.12) if n else -grid**2 / 0.02
        w = np.exp(logp - logp.max())
        w /= w.sum()
        mean, sd = gaussian_posterior(d.tolist(), 0.1, 0.12)
        assert mean == pytest.approx(float(w @ grid), abs=1e-4)
        assert sd == pytest.approx(float(np.sqrt(w @ (grid - w @ grid) ** 2)), abs=1e-4)
        assert prob_better(d.tolist(), 0.1, 0.12) == pytest.approx(float(w[grid > 0].sum()), abs=1e-3)


def test_thompson_concentrates_on_a_promising_challenger():
    pool = ChallengerPool(cap=4)
    lead = _ch("lead")
    pool.add(lead)
    lead.evidence.diffs = [0.25, 0.0, 0.25, -0.25, 0.5, 0.0, 0.25, 0.0] * 2  # n=16, mean +0.125
    for t in ("x", "y", "z"):
        pool.add(_ch(t))  # new, no data
    rng = np.random.default_rng(0)
    share = np.mean([pool.pick_thompson(1, 0.1, rng)[0].id == lead.id for _ in range(2000)])
    assert share > 0.4  # against 0.25 for an even split over the four
    assert [c.id for c in pool.pick_thompson(4, 0.1, rng)][0] in {c.id for c in pool.active}


def test_weakest_is_the_least_likely_to_win_and_only_below_the_threshold():
    pool = ChallengerPool(cap=3)
    a, b, c = _ch("a"), _ch("b"), _ch("c")
    for x in (a, b, c):
        pool.add(x)
    a.evidence.diffs = [-0.25, 0.25, -0.5, 0.0, -0.25, -0.25, 0.0, -0.5]  # P(better) 0.09 on its own variance
    b.evidence.diffs = [0.0] * 8  # c: no data, never evicted
    assert pool.weakest(0.1, 0.3).id == a.id
    assert pool.weakest(0.1, 0.05) is None
    a.evidence.diffs = [0.25] * 8
    assert pool.weakest(0.1, 0.6).id == b.id  # P(better) of b is 1/2


# ---- the sign-flip rule ------------------------------------------------------------------------

def test_signflip_distractors_are_promoted_no_more_often_than_alpha_over_all_looks():
    rule = EvidenceRule(alpha=0.1, looks=6, cap=240)
    rng = np.random.default_rng(10)
    trials = [trial(rng, rule) for _ in range(1000)]  # independent samples: symmetric, never all 0
    rate = np.mean([t.decision == "promoted" for t in trials])
    assert rate <= rule.alpha
    assert all(len(t.per_generation) <= 6 for t in trials)  # retired at the look cap
    # not vacuous: without the correction for looks (each look at alpha) chance winners get through
    naive = EvidenceRule(alpha=0.6, looks=6, cap=240)  # 0.6 / 6 = 0.1 per look
    rng = np.random.default_rng(10)
    assert np.mean([trial(rng, naive).decision == "promoted" for _ in range(1000)]) > rule.alpha


def test_signflip_retires_losing_and_at_the_look_cap():
    rule = EvidenceRule(alpha=0.1, looks=3)
    ev = Evidence()
    assert rule.decide(ev, [-0.25, -0.5, 0.0, -0.25, -0.25, 0.0, -0.5, -0.25]) == "retired-losing"
    ev = Evidence()
    assert rule.decide(ev, [0.0] * 8) == "active"
    assert rule.decide(ev, [0.25, -0.25] * 4) == "active"
    assert rule.decide(ev, [0.0] * 8) == "retired-cap"  # third look
    summary = ev.summary(rule)
    assert summary["p"] > summary["p_threshold"] == pytest.approx(0.1 / 3, abs=1e-5)


def test_pair_variance_shrinks_towards_the_prior():
    from evolve.prompt.evidence import PAIR_VAR, pair_variance

    assert pair_variance([]) == pytest.approx(PAIR_VAR)
    assert pair_variance([0.0] * 8) == pytest.approx(2 * PAIR_VAR / 9)
    d = [0.25, 0.0, 0.5, 0.0]
    assert pair_variance(d) == pytest.approx((np.var(d) * 4 + 2 * PAIR_VAR) / (3 + 2))


def test_own_variance_concentrates_thompson_on_a_consistent_lesson():
    """A lesson whose differences are small but consistent (common random numbers) against three
    new challengers: with its own (shrunk) variance Thompson samples it most generations; with the
    fixed PAIR_VAR of all challengers (deleted: 0.531 against 0.555 held-out) it got 0.39 of them.
    Slow reference for the fixed-variance share: the draws written out."""
    from evolve.prompt.evidence import PAIR_VAR, gaussian_posterior

    pool = ChallengerPool(cap=4)
    lead = _ch("lead")
    pool.add(lead)
    lead.evidence.diffs = [0.25, 0.0, 0.0, 0.125, 0.0, 0.25, 0.0, 0.125] * 2  # n=16, mean +0.094
    for t in ("x", "y", "z"):
        pool.add(_ch(t))
    rng = np.random.default_rng(0)
    share = np.mean([pool.pick_thompson(1, 0.1, rng)[0].id == lead.id for _ in range(2000)])
    rng = np.random.default_rng(0)
    fixed = np.mean([int(np.argmax([rng.normal(*gaussian_posterior(c.evidence.diffs, 0.1, PAIR_VAR))
                                    for c in pool.active])) == 0 for _ in range(2000)])
    assert share > fixed + 0.07  # measured: 0.50 against 0.39
