"""The prompt-selection rules by name: one Protocol (``base.PromptSelection``), one file per rule."""

from __future__ import annotations

from evolve.loop.selection.base import Arm, PromptSelection
from evolve.loop.selection.frozen import Frozen
from evolve.loop.selection.gate import Gate
from evolve.loop.selection.in_group import InGroup

STRATEGIES = {"in_group": InGroup, "gate": Gate}


def selection_for(ctx) -> PromptSelection:
    """The run's rule: ``[loop.selection]``'s type, or Frozen when the prompt lever is off."""
    if not ctx.learn_prompt:
        return Frozen()
    sel = ctx.config.selection
    return STRATEGIES[sel.type](sel)


__all__ = ["STRATEGIES", "Arm", "PromptSelection", "selection_for"]
