"""LM-call recording for the loop: buffered until the generation commits (so a killed
generation leaves no calls behind), or served from the lineage when a generation is replayed."""

from __future__ import annotations

from evolve.prompt.recorder import MemoryRecorder, ReplayRecorder, StoreRecorder


class BufferRecorder(MemoryRecorder):
    """Keeps a generation's LM calls in memory; ``flush`` writes them when it commits."""

    def flush(self, store, generation_id: int) -> dict[int, int]:
        """Write every buffered call; returns local id -> database id."""
        ids = {c.id: store.record_lm_call(c.role, c.model, c.request, c.response, error=c.error, tokens=c.tokens,
                                          latency_s=c.latency_s, generation_id=generation_id)
               for c in self.calls}
        self.calls.clear()
        self._by_hash.clear()
        self._any_by_hash.clear()
        return ids


def replay_recorder(store, generation_id: int | None = None) -> ReplayRecorder:
    """Serves recorded calls (failed ones as failures) by request hash, the replayed generation's
    own calls first; a miss stops the replay with one line."""
    return ReplayRecorder(StoreRecorder(store, generation_id))
