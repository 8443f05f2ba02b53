"""The cluster extension point: where the controller's verifier and rollouts run.

``open_cluster(config, store, say)`` picks a backend by name from ``BACKENDS``:
- ``local``: today's objects in the controller's process (a Verifier; the policy's own backend);
- ``ray``: a RayVerifierPool and, for an hf policy, RayRolloutBackend replicas on a Ray cluster.
The controller (evolve.loop) does not know which one it got: it calls verify_batch and generate.
"""

from __future__ import annotations

from typing import Protocol

from evolve.cluster.config import ClusterConfig


class ClusterBackend(Protocol):
    """Where verification and rollouts run. A backend is built as ``cls(config, store, say)``."""

    name: str

    def verifier(self, pipeline: str | None, jobs: int, allow_weak: bool):
        """The object the loop verifies with (``verify_batch``, ``close``)."""

    def attach(self, policy) -> None:
        """Move the policy's generation onto this backend (or leave it where it is)."""

    def close(self) -> None:
        """Release what ``verifier`` and ``attach`` started."""


class LocalBackend:
    """Everything in the controller's process, exactly as without a [cluster] table."""

    name = "local"

    def __init__(self, config: ClusterConfig, store, say):
        self.config = config

    def verifier(self, pipeline: str | None, jobs: int, allow_weak: bool):
        from evolve.verification import Verifier, load_pipeline

        return Verifier(load_pipeline(pipeline) if pipeline else None, jobs=jobs, allow_weak=allow_weak)

    def attach(self, policy) -> None:
        pass

    def close(self) -> None:
        pass


class RayBackend:
    """Verifier actors and CPU rollout actors on the Ray cluster at ``config.address``."""

    name = "ray"

    def __init__(self, config: ClusterConfig, store, say):
        from evolve.cluster.local import require_ray
        from evolve.cluster.runtime import connect, hosts, require_shared_lineage

        require_ray()
        self.config, self.rollouts, self.say = config, None, say
        connect(config.address)
        node_hosts = hosts()
        require_shared_lineage(store, node_hosts)
        import ray

        say(f"ray cluster {config.address}: {len(ray.nodes())} node(s) on {', '.join(sorted(node_hosts))}, "
            f"{config.verifier_actors} verifier actor(s), {config.rollout_actors} rollout actor(s)")

    def verifier(self, pipeline: str | None, jobs: int, allow_weak: bool):
        from evolve.cluster.verify_pool import RayVerifierPool

        c = self.config
        pool = RayVerifierPool(pipeline, c.verifier_actors, c.verifier_jobs, allow_weak, c.actor_cpus, c.max_retries)
        self.say(f"verification on {len(pool.pool.actors)} Ray actor(s)")
        return pool

    def attach(self, policy) -> None:
        """Swap the policy's generation backend for rollout actors (the trainable model stays here)."""
        if self.config.rollout_actors == 0 or policy.model is None:
            return
        from evolve.cluster.rollout_pool import RayRolloutBackend

        c = self.config
        self.rollouts = RayRolloutBackend(policy.spec, policy.base_path, policy.model, c.rollout_actors,
                                          c.actor_cpus, c.max_retries)
        policy.backend.close()
        policy.backend = self.rollouts
        self.say(f"rollouts on {len(self.rollouts.pool.actors)} Ray actor(s) (policy replicas)")

    def close(self) -> None:
        if self.rollouts is not None:
            self.rollouts.close()


BACKENDS = {"local": LocalBackend, "ray": RayBackend}


def open_cluster(config: ClusterConfig | None, store, say) -> ClusterBackend:
    config = config or ClusterConfig()
    return BACKENDS[config.backend](config, store, say)
