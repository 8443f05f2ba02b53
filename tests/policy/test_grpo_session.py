"""A short GRPO session on gym tasks raises held-out pass@1 (the bootstrapped default tiny-coder).

Needs the default model (about 15 minutes to build on 2 shared cores, `evolve bootstrap`), so it runs
when that model is already built in the runs cache, or when EVOLVE_TEST_POLICY_MODEL names a model
folder; otherwise it is skipped with that reason. (The CI-preset model scores pass@1 = 0: no signal.)
Longer run: `python tests/policy/grpo_session.py --minutes 5` (no results file is committed for it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from grpo_session import grpo_session

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_short_grpo_session_raises_heldout_pass1(default_tiny_model):
    env = os.environ.get("EVOLVE_TEST_POLICY_MODEL")
    model = Path(env) if env else default_tiny_model
    from evolve.gym import load_gym
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt.seed import load_seed_prompt
    from evolve.verification import Verifier

    spec = PolicySpec.from_toml(REPO / "policies" / "tiny-coder.toml")
    spec = PolicySpec.from_dict({**spec.model_dump(), "model": str(model),
                                 "optimizer": {**spec.optimizer.model_dump(), "lr": 2e-4}})
    policy = load_policy(spec)
    components = dict(load_seed_prompt(REPO / "prompts" / "tiny-coder.toml").components)
    train, heldout = load_gym("train", seed=0), load_gym("heldout", seed=0, n=24)
    with Verifier(None, jobs=2) as v:
        out = grpo_session(policy, train, heldout, components, v, steps=12, eval_samples=8)
    assert out["after"] > out["before"], out
    assert out["history"][-1]["train_pass"] >= 0 and len(out["history"]) == 12
