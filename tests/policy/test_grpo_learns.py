"""GRPO moves the policy toward reward: a verifiable toy reward on the random model (fast, always runs).
The reward is measured on held-out prompts the updates never saw (HELDOUT vs TRAIN), for each estimator.

Held-out pass@1 on the tiny-coder gym is a different test, tests/policy/test_grpo_session.py: it needs
the bootstrapped default model and is skipped where that model is not built."""

from __future__ import annotations

import numpy as np
import pytest

from evolve.policy import PolicySpec, load_policy
from evolve.rollout import Rollout

TRAIN = [[{"role": "user", "content": f"task {i}: write f"}] for i in range(6)]
HELDOUT = [[{"role": "user", "content": f"another problem {i}, solve it"}] for i in range(4)]


def _even_rate(policy, prompts, seed):
    out = policy.generate(prompts, n=16, seed=seed)
    return float(np.mean([s.completion_ids[0] % 2 == 0 for g in out for s in g]))


@pytest.mark.parametrize("advantage,loss_type", [("grpo", "grpo"), ("dr_grpo", "dr_grpo"), ("ngrpo", "dapo")])
def test_grpo_raises_reward_on_heldout_prompts(random_model_dir, advantage, loss_type):
    # Reward 1 when the first completion token id is even: verifiable, about 50% at the start.
    spec = PolicySpec.from_dict({
        "model": str(random_model_dir), "seed": 1, "sampling": {"max_new_tokens": 3},
        "optimizer": {"lr": 1e-2}, "grpo": {"advantage": advantage, "loss_type": loss_type},
    })
    policy = load_policy(spec)
    before = _even_rate(policy, HELDOUT, seed=999)
    zero_var = []
    for step in range(20):
        samples = policy.generate(TRAIN, n=8, seed=step)
        groups = [[Rollout(task_id=f"t{g}", group=g, sample_index=j, prompt_version="p", weights_version="w",
                           messages=TRAIN[g], prompt_text=s.prompt_text, completion=s.text,
                           reward=float(s.completion_ids[0] % 2 == 0), prompt_ids=s.prompt_ids,
                           completion_ids=s.completion_ids, logprobs=s.logprobs)
                   for j, s in enumerate(grp)] for g, grp in enumerate(samples)]
        zero_var.append(policy.update(groups).zero_variance_fraction)
    after = _even_rate(policy, HELDOUT, seed=999)
    assert after >= before + 0.2 and after >= 0.75, (before, after)
    assert all(0.0 <= z <= 1.0 for z in zero_var)
