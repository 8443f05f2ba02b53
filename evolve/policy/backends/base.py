"""The generation-backend extension point: the Protocol (its registry: ``backends/registry.py``).

The backend modules import this one and never ``evolve.policy.policy`` or the registry, so
``evolve.policy`` has no import cycle (tests/policy/test_import_graph.py).
"""

from __future__ import annotations

from typing import Protocol

from evolve.errors import EvolveError
from evolve.policy.sample import Sample

VLLM_MISSING = ("vllm backend needs vLLM, which is not installed in this venv: on CPU run `scripts/setup.sh --vllm` "
                "and use .venv-vllm/bin/evolve; on a GPU machine pip install -c constraints/gpu.txt -e '.[gpu]'")


class GenerationBackend(Protocol):
    name: str
    exposes_tokens: bool  # True when samples carry token ids and logprobs (needed for weight updates)

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        """n samples for each chat prompt; deterministic given ``seed`` where the engine allows."""
        ...

    def sync_weights(self, model) -> None:
        """Make the engine sample from ``model``'s current weights (no-op when it IS the model)."""
        ...

    def begin_generation(self) -> None:
        """Drop what the engine cached from earlier calls (vLLM's prefix cache), so a generation samples the
        same whether its run went straight through or was resumed, forked or replayed at it: on a CPU with
        AMX a prompt prefilled from cached blocks gets other bf16 results than one prefilled whole. A no-op
        where nothing is cached between calls."""
        ...

    def close(self) -> None: ...


def require_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise EvolveError(VLLM_MISSING)
