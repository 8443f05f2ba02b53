"""Reflectors: offline (lesson library), any litellm model, and replay through the recorder."""

from __future__ import annotations

from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.recorder import LMRecorder, NullRecorder
from evolve.prompt.reflect.base import Draft, Reflector


def _offline(config: PromptEvolutionConfig, recorder: LMRecorder) -> Reflector:
    from evolve.prompt.reflect.offline import OfflineReflector

    return OfflineReflector(config, recorder)


def _litellm(config: PromptEvolutionConfig, recorder: LMRecorder) -> Reflector:
    from evolve.prompt.reflect.litellm_reflector import LiteLLMReflector

    return LiteLLMReflector(config, recorder)


# ``reflection_lm`` -> factory; any other value is a litellm model string.
REFLECTORS = {"offline": _offline}


def make_reflector(config: PromptEvolutionConfig, recorder: LMRecorder | None = None) -> Reflector:
    """``config.reflection_lm == "offline"`` -> :class:`OfflineReflector`, else a litellm model string.

    Replay is a property of the recorder (:class:`ReplayRecorder`), so it works for both kinds.
    """
    return REFLECTORS.get(config.reflection_lm, _litellm)(config, recorder or NullRecorder())


__all__ = ["REFLECTORS", "Draft", "Reflector", "make_reflector"]
