"""The generation-backend extension point: the Protocol and its name -> factory registry.

``BACKENDS[name](spec, model, tokenizer, base_path)`` builds a backend. ``litellm`` has no local
weights (``model``, ``tokenizer`` and ``base_path`` are None; ``WEIGHTLESS`` names such backends,
so ``load_policy`` builds them before, and instead of, loading a model). The backend modules are
imported inside their factories: vllm and litellm are optional and slow to import, and no module
under ``backends/`` imports ``evolve.policy.policy`` (no import cycle).
"""

from __future__ import annotations

from typing import Protocol

from evolve.errors import EvolveError
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec

VLLM_MISSING = "vllm backend needs the gpu extra: pip install -c constraints/gpu.txt -e '.[gpu]'"


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


def require_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise EvolveError(VLLM_MISSING)


def _hf(spec: PolicySpec, model, tokenizer, base: str | None) -> GenerationBackend:
    from evolve.policy.backends.hf import HFBackend

    return HFBackend(model, tokenizer, spec.sampling)


def _vllm(spec: PolicySpec, model, tokenizer, base: str | None) -> GenerationBackend:
    from evolve.policy.backends.vllm_backend import VllmBackend

    return VllmBackend(base, tokenizer, spec, model)


def _vllm_server(spec: PolicySpec, model, tokenizer, base: str | None) -> GenerationBackend:
    from evolve.policy.backends.vllm_server import VllmServerBackend

    return VllmServerBackend(tokenizer, spec, model)


def _litellm(spec: PolicySpec, model, tokenizer, base: str | None) -> GenerationBackend:
    from evolve.policy.backends.litellm_backend import LitellmBackend

    return LitellmBackend(spec.litellm, spec.sampling)


BACKENDS = {"hf": _hf, "vllm": _vllm, "vllm-server": _vllm_server, "litellm": _litellm}
WEIGHTLESS = frozenset({"litellm"})  # backends that sample from no local weights (frozen: prompt evolution only)
NEEDS_VLLM = frozenset({"vllm", "vllm-server"})
