"""With a turn-level estimator (GiGPO), an all-pass group whose episodes took different numbers of
turns reaches the weights, and the faster solution gets the larger first-turn advantage."""

from __future__ import annotations

from evolve.loop.routing import route, turn_level
from evolve.policy.advantages import get_estimator
from evolve.policy.turns import assign_group
from evolve.rollout import Rollout, Turn
from evolve.verification.types import VerifyResult


def _episode(i: int, n_turns: int) -> Rollout:
    turns = []
    for k in range(n_turns):
        if k:
            turns.append(Turn("user", "visible test failed"))
        turns.append(Turn("assistant", f"try {k}", observation_hash="start" if k == 0 else f"s{i}{k}"))
    return Rollout("t", 0, i, "p", "w", [], "", "code", VerifyResult("t", 1.0, True), 1.0, turns=turns)


def _group(turn_counts):
    return [_episode(i, n) for i, n in enumerate(turn_counts)]


def test_all_pass_groups_reach_the_weights_only_for_a_turn_level_update():
    fast_and_slow, all_fast = _group([1, 1, 3, 2]), _group([1, 1, 1, 1])
    plain = route([fast_and_slow, all_fast])
    assert plain.weight_groups == [] and plain.all_pass_tasks == ["t", "t"]
    turned = route([fast_and_slow, all_fast], turn_level=True)
    assert turned.weight_groups == [fast_and_slow]
    assign_group(fast_and_slow, get_estimator("gigpo", gamma=0.9))
    first = [r.turns[0].advantage for r in fast_and_slow]
    assert all(r.advantage == 0.0 for r in fast_and_slow)  # equal final rewards: no episode signal
    assert first[0] == first[1] > 0 > first[3] > first[2]  # 1 turn > 2 turns > 3 turns


def test_turn_level_reads_the_policys_estimator():
    class Up:
        def __init__(self, name):
            self.estimator = get_estimator(name)

    class Pol:
        def __init__(self, name):
            self.updater = Up(name)

    assert turn_level(Pol("gigpo")) and not turn_level(Pol("grpo")) and not turn_level(object())
