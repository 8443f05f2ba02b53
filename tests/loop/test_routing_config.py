"""Routing of failures between the levers, the task sampler, and the loop config."""

from __future__ import annotations

import pytest

from evolve.errors import ConfigError
from evolve.loop.config import GenerationSeeds, LoopConfig
from evolve.loop.routing import failure_class, group_by_task, route
from evolve.loop.state import LoopState, SamplerState, rollout_from_dict, rollout_to_dict
from evolve.rollout import Rollout
from evolve.verification.types import StageResult, TestFailure, VerifyResult


def rollout(task: str, passed: bool, error: str = "WrongAnswer", inp: str = "f([1, 2])", i: int = 0) -> Rollout:
    failures = [] if passed else [TestFailure("hidden", error, "msg", inp, "0", "None")]
    result = VerifyResult(task_id=task, reward=float(passed), passed=passed,
                          stages=[StageResult("hidden", float(passed), passed, failures=failures)],
                          error_class=None if passed else error)
    return Rollout(task_id=task, group=0, sample_index=i, prompt_version="p", weights_version="w",
                   messages=[], prompt_text="", completion="", result=result, reward=float(passed))


def test_failure_class_reads_error_type_and_input_shape():
    assert failure_class(rollout("a", True)) is None
    assert failure_class(rollout("a", False, "ZeroDivisionError", "f([])")) == "ZeroDivisionError[empty]"
    assert failure_class(rollout("a", False, "WrongAnswer", "f([3, 1], 2)")) == "WrongAnswer"


def test_route_sends_all_fail_groups_to_reflection_and_mixed_to_weights():
    rolls = ([rollout("allfail", False, "IndexError", "f([])", i) for i in range(4)]
             + [rollout("mixed", i % 2 == 0, "WrongAnswer", "f([5])", i) for i in range(4)]
             + [rollout("allpass", True, i=i) for i in range(4)])
    r = route(group_by_task(rolls), recurring_min_groups=2)
    assert r.all_fail_tasks == ["allfail"] and r.mixed_tasks == ["mixed"] and r.all_pass_tasks == ["allpass"]
    assert [g[0].task_id for g in r.weight_groups] == ["mixed"]
    # every all-fail sample goes to reflection; the mixed group's class occurs in one group only
    assert {x.task_id for x in r.reflection_rollouts} == {"allfail"} and len(r.reflection_rollouts) == 4
    assert {x.task_id for x in r.contrast_rollouts} == {"mixed", "allpass"}
    assert r.summary()["zero_variance_fraction"] == pytest.approx(2 / 3)


def test_recurring_failure_class_in_mixed_groups_also_goes_to_reflection():
    rolls = []
    for t in ("m1", "m2"):
        rolls += [rollout(t, True, i=0), rollout(t, False, "TypeMismatch", "f([4])", 1)]
    r = route(group_by_task(rolls), recurring_min_groups=2)
    assert r.recurring_classes == ["TypeMismatch"]
    assert sorted(x.task_id for x in r.reflection_rollouts) == ["m1", "m2"]


def test_sampler_is_deterministic_and_covers_every_task_per_epoch():
    a, b = SamplerState(seed=3), SamplerState(seed=3)
    first = a.take(10, 7) + a.take(10, 3)
    assert sorted(first) == list(range(10))
    assert b.take(10, 7) + b.take(10, 3) == first
    assert a.epoch == 1 and a.cursor == 0
    # a restored sampler continues exactly where the saved one was
    c = SamplerState(**{"seed": 3, "epoch": 1, "cursor": 0})
    assert c.take(10, 4) == a.take(10, 4)


def test_loop_state_round_trips_rollouts_exactly():
    r = rollout("x", False, "IndexError", "f([])")
    r.logprobs = [-0.1234567891234, -2.5]
    state = LoopState(SamplerState(1, 2, 3), rollouts_spent=7, carried=[rollout_to_dict(r)])
    back = LoopState.from_dict(state.to_dict())
    assert back.to_dict() == state.to_dict()
    assert rollout_from_dict(back.carried[0]).logprobs == r.logprobs
    assert rollout_from_dict(back.carried[0]).result.failures[0].error_type == "IndexError"


def test_config_rejects_bad_values_with_one_line():
    with pytest.raises(ConfigError, match="unknown key 'nope'"):
        LoopConfig.from_dict({"nope": 1})
    with pytest.raises(ConfigError, match="heldout_ks"):
        LoopConfig.from_dict({"heldout_samples": 4, "heldout_ks": [1, 8]})
    with pytest.raises(ConfigError, match="samples_per_task"):
        LoopConfig().with_overrides(samples_per_task=0)
    cfg = LoopConfig.from_dict({"mode": "prompt", "heldout_ks": [1, 2]})
    assert LoopConfig.from_dict(cfg.to_dict()) == cfg


def test_generation_seeds_differ_by_index_but_heldout_seed_is_shared():
    a, b = GenerationSeeds.derive(0, 1), GenerationSeeds.derive(0, 2)
    assert a.sample != b.sample and a.reflect != b.reflect
    assert a.heldout == b.heldout  # common random numbers across generations
    assert GenerationSeeds.derive(1, 1).sample != a.sample


def test_groups_are_per_task_across_prompts_in_first_seen_order():
    """One advantage baseline per task, across the prompts that shared its group (E-SPL's
    "marginalize"; the per-prompt baseline measured worse and was deleted)."""
    a, b = rollout("t", True, i=0), rollout("t", False, i=1)
    b.prompt_version = "other"
    groups = group_by_task([a, rollout("u", False, i=3), b, rollout("t", False, i=2)])
    assert [[r.sample_index for r in g] for g in groups] == [[0, 1, 2], [3]]
