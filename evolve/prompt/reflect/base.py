"""The reflector extension point: propose new component texts from a reflective dataset."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from evolve.prompt.candidate import Candidate
from evolve.prompt.reflective_dataset import ReflectiveDataset


@dataclass
class Draft:
    """One reflector output. ``components`` is None for a failed proposal (``error`` says why)."""

    components: dict[str, str] | None
    kind: str  # "reflection" | "add-lesson" | "remove-lesson" | "reorder-lessons" | "swap-demos" | ...
    rationale: str = ""
    lm_call_ids: list[int] = field(default_factory=list)
    error: str | None = None
    cost_usd: float = 0.0


@runtime_checkable
class Reflector(Protocol):
    """Turns (parent candidate, reflective dataset) into up to ``n`` drafts.

    Implementations record every request/response through their :class:`LMRecorder`
    and are deterministic given ``rng`` and the record (replay).
    """

    name: str  # "offline" or the LM model string

    def reflect(self, parent: Candidate, dataset: ReflectiveDataset, rng: random.Random, n: int,
                avoid: frozenset[str] = frozenset(), rejected: dict[str, int] | None = None) -> list[Draft]:
        """``avoid``: ids (16-hex-digit prefixes) of candidates already in the pool; do not propose them again.
        ``rejected``: lesson lines whose addition the gate rejected, with counts (a reflector may down-weight them).
        """
        ...
