"""CPU rollout workers on Ray: policy replicas as actors, behind the GenerationBackend protocol.

The controller's Policy keeps the trainable model and the updater; its backend becomes this pool.
Each actor builds the same model as the controller (spec, base folder, seeded init, so a LoRA
adapter has the same structure) and takes the controller's weights from the object store: at start
(so resume and fork begin from the checkpoint) and after every update (``sync_weights``; one
``ray.put``, every actor reads the same object). Tasks are split into contiguous shards, one per
actor; with ``sampling.seed_scope = "task"`` each task's samples come from a stream seeded by
(seed, the task's index in the whole batch), so the samples are the same however the tasks are
split, and the same as a local run with that setting. A shard whose actor died is generated again
by a replacement actor, which first loads the current weights.
"""

from __future__ import annotations

import hashlib
import os

from evolve.cluster.shards import ActorSet, split
from evolve.errors import ConfigError, EvolveError


def state_digest(state: dict) -> str:
    """sha256 over (name, dtype, shape, bytes) of a state dict, in name order (what the actor now holds)."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous().reshape(-1)
        h.update(f"{name}|{t.dtype}|{tuple(state[name].shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def cpu_state(model) -> dict:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


class RolloutActor:
    """One policy replica: the HF backend on its own copy of the model, one torch thread."""

    def __init__(self, spec_dict: dict, base_path: str):
        import torch

        from evolve.policy import PolicySpec
        from evolve.policy.backends.hf import HFBackend
        from evolve.policy.model_io import load_model, load_tokenizer

        spec = PolicySpec.from_recorded(spec_dict)
        torch.set_num_threads(spec.threads)
        tokenizer = load_tokenizer(base_path)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)  # as load_policy: the same (LoRA) structure and init
            model = load_model(spec, base_path, device="cpu")
        self.backend = HFBackend(model, tokenizer, spec.sampling)

    def ping(self) -> int:
        return os.getpid()

    def load_weights(self, state: dict) -> str:
        self.backend.model.load_state_dict(state, strict=True)
        return state_digest(self.backend.model.state_dict())

    def generate(self, prompts: list, n: int, seed: int, first_task: int) -> list:
        return self.backend.generate(prompts, n, seed, first_task=first_task)


class RayRolloutBackend:
    """GenerationBackend over ``actors`` RolloutActors (hf sampling, CPU)."""

    name = "ray-hf"
    exposes_tokens = True

    def __init__(self, spec, base_path: str, model, actors: int, actor_cpus: float = 0.5, max_retries: int = 3):
        import ray

        if spec.backend != "hf":
            raise ConfigError(f"[cluster] ray rollout actors run the hf backend; the policy uses {spec.backend!r} "
                              "(set rollout_actors = 0 to generate in the controller)")
        if spec.sampling.seed_scope != "task":
            raise ConfigError("[cluster] ray rollout actors need [sampling] seed_scope = \"task\" in the policy "
                              "spec, so samples do not depend on how tasks are split between actors")
        remote = ray.remote(num_cpus=actor_cpus, max_restarts=0, max_task_retries=0)(RolloutActor)
        spec_dict, base = spec.model_dump(mode="json"), os.path.abspath(base_path)
        self.weights_ref, self.digest = None, None

        def make():
            actor = remote.remote(spec_dict, base)
            if self.weights_ref is not None:  # a replacement starts from the current weights
                got = ray.get(actor.load_weights.remote(self.weights_ref))
                if got != self.digest:
                    raise EvolveError("a rollout actor holds different weights than the controller sent")
            return actor

        self.pool = ActorSet(make, actors, "rollout", max_retries)
        self.sync_weights(model)

    def sync_weights(self, model) -> None:
        """Publish the controller's weights once (ray.put) and have every actor load them; checked by digest."""
        import ray

        state = cpu_state(model)
        self.digest = state_digest(state)
        self.weights_ref = ray.put(state)
        got = self.pool.run([self.weights_ref] * len(self.pool.actors),
                            lambda actor, ref: actor.load_weights.remote(ref))
        if any(d != self.digest for d in got):
            raise EvolveError("a rollout actor holds different weights than the controller sent")

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list:
        if not prompts:
            return []
        ranges = split(len(prompts), len(self.pool.actors))
        shards = [(prompts[a:b], a) for a, b in ranges]
        parts = self.pool.run(shards, lambda actor, s: actor.generate.remote(s[0], n, seed, s[1]))
        return [group for part in parts for group in part]

    def begin_generation(self) -> None:  # hf actors: nothing is cached between calls
        pass

    def close(self) -> None:
        self.pool.close()
