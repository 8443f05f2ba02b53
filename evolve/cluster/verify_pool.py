"""Verification on Ray: actors each holding one sandboxed Verifier (full isolation on its node).

A batch is split into contiguous shards, one per actor, and the results come back in the batch's
order; a shard whose actor died is verified again by a replacement actor. Verdicts are functions of
(task, completion) only, so the pool gives exactly the local Verifier's results.
This module imports no torch and no policy (actors load only evolve.verification).
"""

from __future__ import annotations

import os

from evolve.cluster.shards import ActorSet, split
from evolve.errors import EvolveError


class VerifierActor:
    """One actor process: one Verifier (its own bubblewrap + seccomp fork-server)."""

    def __init__(self, pipeline: str | None, jobs: int, allow_weak: bool):
        from evolve.verification import Verifier, load_pipeline

        self.verifier = Verifier(load_pipeline(pipeline) if pipeline else None, jobs=jobs, allow_weak=allow_weak)

    def ping(self) -> int:
        return os.getpid()

    def isolation(self) -> str:
        return self.verifier.isolation

    def verify_batch(self, pairs: list) -> list:
        return self.verifier.verify_batch(pairs)


class RayVerifierPool:
    """The Verifier's API (verify_batch, verify, isolation, close) over ``actors`` Ray actors."""

    def __init__(self, pipeline: str | None, actors: int, jobs: int = 1, allow_weak: bool = False,
                 actor_cpus: float = 0.5, max_retries: int = 3):
        import ray

        remote = ray.remote(num_cpus=actor_cpus, max_restarts=0, max_task_retries=0)(VerifierActor)
        pipeline = os.path.abspath(pipeline) if pipeline else None

        def make():
            return remote.remote(pipeline, jobs, allow_weak)

        self.pool = ActorSet(make, actors, "verification", max_retries)
        try:
            levels = set(ray.get([a.isolation.remote() for a in self.pool.actors]))
        except Exception as e:  # the sandbox refused on a node (e.g. no bubblewrap): one line, as locally
            self.pool.close()
            cause = getattr(e, "cause", None) or e
            raise EvolveError(f"a verifier actor could not start: {' '.join(str(cause).split())[:300]}") from None
        if len(levels) != 1:
            self.pool.close()
            raise EvolveError(f"verifier actors run at different isolation levels {sorted(levels)}")
        self.isolation = levels.pop()

    def verify_batch(self, pairs: list) -> list:
        if not pairs:
            return []
        shards = [pairs[a:b] for a, b in split(len(pairs), len(self.pool.actors))]
        parts = self.pool.run(shards, lambda actor, shard: actor.verify_batch.remote(shard))
        return [r for part in parts for r in part]

    def verify(self, task, completion: str):
        return self.verify_batch([(task, completion)])[0]

    def close(self) -> None:
        self.pool.close()
