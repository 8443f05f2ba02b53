"""The gym's hard tier (evolve/gym/tiers.py): what it contains, and that the default model's
groups really fail entirely there (the regime reflection is for)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.errors import ConfigError
from evolve.gym import load_gym, load_tier
from evolve.gym.notes import CMP

REPO = Path(__file__).resolve().parents[2]


def test_hard_tier_is_half_cmp_tasks_deterministic_and_keeps_splits_apart():
    train, held = load_gym("train"), load_gym("heldout")
    hard = load_tier("hard", train)
    cmp_tasks = [t for t in train if CMP in t.meta["bug_modes"]]
    assert sum(CMP in t.meta["bug_modes"] for t in hard) == len(cmp_tasks) == len(hard) // 2
    assert [t.task_id for t in hard] == [t.task_id for t in load_tier("hard", train)]
    ids = {t.task_id for t in train}
    assert all(t.task_id in ids for t in hard)
    order = {t.task_id: i for i, t in enumerate(train)}
    assert [order[t.task_id] for t in hard] == sorted(order[t.task_id] for t in hard)
    hard_held = load_tier("hard", held)
    comps = {tuple(t.meta["composition"]) for t in hard}
    assert hard_held and not comps & {tuple(t.meta["composition"]) for t in hard_held}


def test_unknown_tier_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown gym tier"):
        load_tier("brutal", load_gym("heldout"))


def test_default_model_fails_whole_groups_on_the_hard_half(default_tiny_model):
    from evolve.policy import PolicySpec, load_policy
    from evolve.policy.evaluate import evaluate_pass_at_k
    from evolve.verification import Verifier

    policy = load_policy(PolicySpec.from_toml(REPO / "policies" / "tiny-coder.toml"))
    tasks = [t for t in load_tier("hard", load_gym("train")) if CMP in t.meta["bug_modes"]][::50][:8]
    seed = {"system": "Write a Python function that solves the task.", "lessons": ""}
    with Verifier(None, jobs=1) as v:
        res = evaluate_pass_at_k(policy, tasks, seed, 8, [1], v, seed=0)
    all_fail = sum(r["c"] == 0 for r in res["tasks"].values())
    assert all_fail >= 4  # at least half the groups of 8 fail entirely (benchmarks/hard_tier.py measures more)
