"""Where reflection LM calls are recorded, and where replay reads them back.

Every reflection request (offline ones too, with model="offline") goes through
:func:`recorded_call`, so a replayed cycle is served from the record and needs no LM.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from evolve.errors import EvolveError
from evolve.util.hashing import content_hash


@runtime_checkable
class LMRecorder(Protocol):
    """Records LM calls; ``lookup`` returns a recorded successful response by request hash."""

    replay: bool  # True: serve every request from ``lookup``, never call an LM

    def record(self, role: str, model: str, request: dict, response: dict | None, error: str | None,
               tokens: dict, latency_s: float) -> int | None: ...

    def lookup(self, request_hash: str) -> dict | None: ...

    def lookup_outcome(self, request_hash: str) -> tuple[dict | None, str | None] | None:
        """(response, error) of the recorded call, failed calls included; None if never recorded."""
        ...


class NullRecorder:
    """Records nothing (a run with no lineage)."""

    replay = False

    def record(self, role, model, request, response, error, tokens, latency_s) -> int | None:
        return None

    def lookup(self, request_hash: str) -> dict | None:
        return None

    def lookup_outcome(self, request_hash: str) -> tuple[dict | None, str | None] | None:
        return None


@dataclass
class RecordedCall:
    id: int
    role: str
    model: str
    request: dict
    response: dict | None
    error: str | None
    tokens: dict
    latency_s: float

    @property
    def request_hash(self) -> str:
        return content_hash(self.request)


class MemoryRecorder:
    """Keeps calls in a list (tests)."""

    replay = False

    def __init__(self) -> None:
        self.calls: list[RecordedCall] = []
        self._by_hash: dict[str, int] = {}
        self._any_by_hash: dict[str, int] = {}  # the latest call per request, failed ones included

    def record(self, role, model, request, response, error, tokens, latency_s) -> int | None:
        call = RecordedCall(len(self.calls) + 1, role, model, request, response, error, dict(tokens or {}),
                            float(latency_s))
        self.calls.append(call)
        if response is not None and error is None:
            self._by_hash[call.request_hash] = len(self.calls) - 1
        self._any_by_hash[call.request_hash] = len(self.calls) - 1
        return call.id

    def lookup(self, request_hash: str) -> dict | None:
        i = self._by_hash.get(request_hash)
        return None if i is None else self.calls[i].response

    def lookup_outcome(self, request_hash: str) -> tuple[dict | None, str | None] | None:
        i = self._any_by_hash.get(request_hash)
        return None if i is None else (self.calls[i].response, self.calls[i].error)


class StoreRecorder:
    """Adapter over a :class:`evolve.lineage.LineageStore`: calls become ``lm_calls`` rows of a generation."""

    replay = False

    def __init__(self, store: Any, generation_id: int | None = None) -> None:
        self.store = store
        self.generation_id = generation_id

    def record(self, role, model, request, response, error, tokens, latency_s) -> int | None:
        return self.store.record_lm_call(role, model, request, response, error=error, tokens=dict(tokens or {}),
                                         latency_s=float(latency_s), generation_id=self.generation_id)

    def lookup(self, request_hash: str) -> dict | None:
        call = self.store.find_lm_call(request_hash)
        if call is None or getattr(call, "error", None):
            return None
        return getattr(call, "response", None)

    def lookup_outcome(self, request_hash: str) -> tuple[dict | None, str | None] | None:
        """The call recorded in this recorder's generation first (a replay re-runs one generation),
        else the most recent anywhere; a failed call comes back as failed."""
        call = self.store.find_lm_call(request_hash, include_failed=True, generation_id=self.generation_id)
        return None if call is None else (call.response, call.error)


class ReplayRecorder:
    """Lookup only: every request must have a recorded response, else replay stops with one line."""

    replay = True

    def __init__(self, source: LMRecorder) -> None:
        self.source = source

    def record(self, role, model, request, response, error, tokens, latency_s) -> int | None:
        return None

    def lookup(self, request_hash: str) -> dict | None:
        response = self.source.lookup(request_hash)
        if response is None:
            raise EvolveError(f"replay: no recorded response for request {request_hash[:16]}")
        return response

    def lookup_outcome(self, request_hash: str) -> tuple[dict | None, str | None]:
        found = self.source.lookup_outcome(request_hash)
        if found is None:
            raise EvolveError(f"replay: no recorded response for request {request_hash[:16]}")
        return found


@dataclass
class CallOutcome:
    response: dict | None
    error: str | None
    call_id: int | None
    tokens: dict
    cost_usd: float = 0.0


def recorded_call(recorder: LMRecorder, role: str, model: str, request: dict,
                  fn: Callable[[], tuple[dict | None, str | None, dict, float]]) -> CallOutcome:
    """Serve ``request`` from the record (replay) or run ``fn`` and record what it gave.

    ``fn`` returns (response, error, tokens, cost_usd); it never raises for an LM failure.
    """
    if getattr(recorder, "replay", False):  # a call that failed when recorded fails again, the same way
        response, error = recorder.lookup_outcome(content_hash(request))
        return CallOutcome(response, error, None, {}, 0.0)
    t0 = time.perf_counter()
    response, error, tokens, cost = fn()
    latency = time.perf_counter() - t0
    call_id = recorder.record(role, model, request, response, error, {**tokens, "cost_usd": cost}, latency)
    return CallOutcome(response, error, call_id, tokens, cost)
