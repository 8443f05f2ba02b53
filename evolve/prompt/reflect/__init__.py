"""Reflectors: offline (lesson library), any litellm model, and replay through the recorder."""

from __future__ import annotations

from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.recorder import LMRecorder, NullRecorder
from evolve.prompt.reflect.base import Draft, Reflector


def make_reflector(config: PromptEvolutionConfig, recorder: LMRecorder | None = None) -> Reflector:
    """``config.reflection_lm == "offline"`` -> :class:`OfflineReflector`, else a litellm model string.

    Replay is a property of the recorder (:class:`ReplayRecorder`), so it works for both kinds.
    """
    recorder = recorder or NullRecorder()
    if config.reflection_lm == "offline":
        from evolve.prompt.reflect.offline import OfflineReflector

        return OfflineReflector(config, recorder)
    from evolve.prompt.reflect.litellm_reflector import LiteLLMReflector

    return LiteLLMReflector(config, recorder)


__all__ = ["Draft", "Reflector", "make_reflector"]
