"""Sharding a batch over actors, in order, with a dead actor's shard retried on another (pure Ray, no evolve roles)."""

from __future__ import annotations

from collections.abc import Callable

from evolve.errors import EvolveError


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) ranges covering range(n), as even as possible, none empty."""
    parts = max(1, min(parts, n))
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    return out


class ActorSet:
    """A fixed number of actors; a dead one is replaced by a fresh one made by ``make()``."""

    def __init__(self, make: Callable, size: int, what: str, max_retries: int = 3):
        self.make, self.what, self.max_retries = make, what, max_retries
        self.actors = [make() for _ in range(size)]
        self.replaced = 0  # how many actors died and were replaced (reported in the pool's stats)

    def run(self, shards: list, submit: Callable) -> list:
        """``submit(actor, shard) -> ObjectRef`` for every shard (round-robin over actors); results in shard
        order. A shard whose actor died goes to the next actor (a fresh replacement), up to max_retries."""
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        results: list = [None] * len(shards)
        tries = [0] * len(shards)
        pending = {}
        for i, shard in enumerate(shards):
            slot = i % len(self.actors)
            pending[submit(self.actors[slot], shard)] = (i, slot)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            i, slot = pending.pop(ref)
            try:
                results[i] = ray.get(ref)
            except (RayActorError, ActorDiedError, ActorUnavailableError) as e:
                tries[i] += 1
                if tries[i] > self.max_retries:
                    raise EvolveError(f"{self.what} shard {i} failed {tries[i]} times; last: "
                                      f"{' '.join(str(e).split())[:200]}") from None
                slot = self._replace(slot)
                pending[submit(self.actors[slot], shards[i])] = (i, slot)
        return results

    def _replace(self, slot: int) -> int:
        """Replace the actor in ``slot`` (once, even if several of its shards failed); returns the slot to use."""
        import ray

        try:
            ray.get(self.actors[slot].ping.remote(), timeout=30)
            return slot  # it answers: the failure was another actor incarnation's, use it as is
        except Exception:  # noqa: BLE001 - dead or unreachable: make a new one
            self.actors[slot] = self.make()
            self.replaced += 1
            return slot

    def close(self) -> None:
        import ray

        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
