"""The Ray pools against the local Verifier and HF backend, on a real two-node loopback cluster:
- every node address the cluster lists (and the driver's) is 127.0.0.1;
- the verifier pool returns exactly the local verdicts, in order, at full isolation, also when an
  actor was killed -9 (its shard is verified again by a replacement);
- rollout actors give exactly the local samples (seed_scope = "task"), before and after a weight
  sync, however the tasks are split, and when an actor was killed -9."""

from __future__ import annotations

import os
import signal

import pytest
from cluster_helpers import verdicts

from evolve.verification import Verifier


@pytest.fixture(scope="module")
def batch(gym_tasks):
    """Each task with its reference solution, a wrong answer and a syntax error (48 verdicts)."""
    pairs = []
    for t in gym_tasks:
        pairs += [(t, t.canonical_solution), (t, "def f(*a):\n    return 0\n"), (t, "def f(:\n")]
    return pairs


def test_cluster_is_loopback_only(ray_driver):
    import ray

    from evolve.cluster.loopback import node_addresses

    nodes = ray.nodes()
    assert len([n for n in nodes if n["Alive"]]) == 2
    addresses = node_addresses()
    assert addresses and set(addresses) == {"127.0.0.1"}, addresses
    assert ray.util.get_node_ip_address() == "127.0.0.1"  # the driver


def test_verifier_pool_equals_local_and_survives_a_killed_actor(ray_driver, batch):
    from evolve.cluster.verify_pool import RayVerifierPool

    with Verifier(None, jobs=1) as local:
        expected = verdicts(local.verify_batch(batch))
        isolation = local.isolation
    pool = RayVerifierPool(None, actors=2, jobs=1, actor_cpus=0.5)
    try:
        assert pool.isolation == isolation == "bwrap+seccomp"
        assert verdicts(pool.verify_batch(batch)) == expected
        assert all(v["passed"] for v in expected[0::3]) and not any(v["passed"] for v in expected[2::3])
        import ray

        victim = ray.get(pool.pool.actors[1].ping.remote())
        maps = open(f"/proc/{victim}/maps").read()
        assert "libtorch" not in maps  # a verifier actor never loads torch (architecture rule)
        os.kill(victim, signal.SIGKILL)
        assert verdicts(pool.verify_batch(batch)) == expected
        assert pool.pool.replaced == 1
        assert verdicts([pool.verify(*batch[0])]) == expected[:1]
    finally:
        pool.close()


def test_rollout_actors_equal_local_samples(ray_driver, tiny_model_dir):
    import torch

    from evolve.cluster.rollout_pool import RayRolloutBackend
    from evolve.gym import load_gym
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt.candidate import render_messages

    spec = PolicySpec.from_toml("policies/tiny-coder-ci-task.toml")
    policy = load_policy(spec)
    tasks = load_gym("train", seed=0, n=5)
    prompts = [render_messages({"system": "Write f."}, t) for t in tasks]

    def texts(groups):
        return [[(s.text, s.completion_ids, [round(x, 5) for x in s.logprobs]) for s in g] for g in groups]

    local = texts(policy.backend.generate(prompts, 3, 7))
    pool = RayRolloutBackend(spec, policy.base_path, policy.model, actors=2, actor_cpus=0.5)
    try:
        assert texts(pool.generate(prompts, 3, 7)) == local
        assert texts(pool.generate(prompts[2:], 3, 7))[0] != local[2]  # the stream is keyed by batch index
        with torch.no_grad():  # a weight update, as after GRPO: the actors must sample from the new weights
            for p in policy.model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        pool.sync_weights(policy.model)
        updated = texts(policy.backend.generate(prompts, 3, 7))
        assert updated != local
        assert texts(pool.generate(prompts, 3, 7)) == updated
        import ray

        os.kill(ray.get(pool.pool.actors[0].ping.remote()), signal.SIGKILL)
        assert texts(pool.generate(prompts, 3, 7)) == updated  # the replacement loaded the new weights
        assert pool.pool.replaced == 1
    finally:
        pool.close()


@pytest.mark.skipif(os.environ.get("EVOLVE_RAY_SLOW") != "1", reason="slow Ray test: set EVOLVE_RAY_SLOW=1")
def test_rollout_actors_equal_local_samples_lora(ray_driver, tiny_model_dir):
    """A LoRA policy: actors build the same PEFT structure and take the adapter with the state dict."""
    import torch

    from evolve.cluster.rollout_pool import RayRolloutBackend
    from evolve.gym import load_gym
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt.candidate import render_messages

    base = PolicySpec.from_toml("policies/tiny-coder-ci-task.toml")
    spec = PolicySpec.model_validate({**base.model_dump(mode="json"), "finetune": "lora"})
    policy = load_policy(spec)
    prompts = [render_messages({"system": "Write f."}, t) for t in load_gym("train", seed=0, n=3)]
    pool = RayRolloutBackend(spec, policy.base_path, policy.model, actors=2, actor_cpus=0.5)
    try:
        with torch.no_grad():  # move the adapter only, as a LoRA update does
            for name, p in policy.model.named_parameters():
                if "lora_" in name:
                    p.add_(0.1 * torch.randn_like(p))
        pool.sync_weights(policy.model)

        def ids(groups):
            return [[s.completion_ids for s in g] for g in groups]

        assert ids(pool.generate(prompts, 2, 5)) == ids(policy.backend.generate(prompts, 2, 5))
    finally:
        pool.close()
