"""LM-call recording for the loop: buffered until the generation commits, or served
from the lineage when a generation is replayed."""

from __future__ import annotations

from dataclasses import dataclass, field

from evolve.errors import EvolveError
from evolve.util.hashing import content_hash


@dataclass
class BufferedCall:
    role: str
    model: str
    request: dict
    response: dict | None
    error: str | None
    tokens: dict
    latency_s: float


@dataclass
class BufferRecorder:
    """Keeps a generation's LM calls in memory; ``flush`` writes them when it commits.

    Local ids are negative so they cannot be mistaken for database ids.
    """

    calls: list[BufferedCall] = field(default_factory=list)
    replay: bool = False

    def record(self, role, model, request, response, error=None, tokens=None, latency_s=0.0) -> int:
        self.calls.append(BufferedCall(role, model, request, response, error, dict(tokens or {}), latency_s))
        return -len(self.calls)

    def lookup(self, request_hash: str) -> dict | None:
        return None  # a live run always asks the LM; replay serves from the record

    def flush(self, store, generation_id: int) -> dict[int, int]:
        """Write every buffered call; returns local id -> database id."""
        ids = {}
        for i, c in enumerate(self.calls, start=1):
            ids[-i] = store.record_lm_call(c.role, c.model, c.request, c.response, error=c.error,
                                           tokens=c.tokens, latency_s=c.latency_s, generation_id=generation_id)
        self.calls.clear()
        return ids


@dataclass
class StoreReplayRecorder:
    """Serves recorded responses by request hash; a miss means the replay cannot be faithful."""

    store: object
    replay: bool = True

    def record(self, role, model, request, response, error=None, tokens=None, latency_s=0.0) -> int:
        return 0

    def lookup(self, request_hash: str) -> dict | None:
        call = self.store.find_lm_call(request_hash)
        if call is None:
            raise EvolveError(f"replay: no recorded response for reflection request {request_hash[:12]}")
        return call.response

    @staticmethod
    def hash_request(request: dict) -> str:
        return content_hash(request)
