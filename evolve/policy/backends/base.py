"""The generation-backend extension point: hf (default), vllm, vllm-server, litellm."""

from __future__ import annotations

from typing import Protocol

from evolve.policy.sample import Sample


class GenerationBackend(Protocol):
    name: str
    exposes_tokens: bool  # True when samples carry token ids and logprobs (needed for weight updates)

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        """n samples for each chat prompt; deterministic given ``seed`` where the engine allows."""
        ...

    def sync_weights(self, model) -> None:
        """Make the engine sample from ``model``'s current weights (no-op when it IS the model)."""
        ...

    def close(self) -> None: ...
