"""Generation backends by name: ``BACKENDS[name](spec, model, tokenizer, base_path)``.

``litellm`` has no local weights (``model``, ``tokenizer`` and ``base_path`` are None): ``WEIGHTLESS``
names such backends, which ``load_policy`` builds instead of loading a model. Each backend module is
imported inside its factory: vllm and litellm are optional and slow to import.
"""

from __future__ import annotations

from evolve.policy.backends.base import GenerationBackend
from evolve.policy.spec import PolicySpec


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
