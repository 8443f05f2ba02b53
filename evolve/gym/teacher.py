"""The deliberately imperfect teacher that writes the SFT corpus.

For each applicable bug mode it injects the bug with that mode's rate, unless
the mode's note is a line of the system message: then it never makes that bug.
So the notes are causal for the teacher, and a model trained on its output can
learn to follow them (how well is measured by ``evolve bootstrap``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from evolve.gym.grammar import composition_from_names
from evolve.gym.notes import modes_switched_off
from evolve.verification.types import Task


def teacher_solution(task: Task, rng: random.Random, system_text: str,
                     rates: Mapping[str, float]) -> tuple[str, list[str]]:
    """(solution code, injected bug modes) for ``task`` under a system message."""
    comp = composition_from_names(task.meta["composition"])
    off = modes_switched_off(system_text)
    bugs = []
    for mode in task.meta.get("bug_modes", ()):
        # Draw for every mode even when switched off, so RNG use does not depend on the notes.
        hit = rng.random() < float(rates.get(mode, 0.0))
        if hit and mode not in off:
            bugs.append(mode)
    style, guard_style = rng.randrange(2), rng.randrange(2)
    return comp.render(set(bugs), style=style, guard_style=guard_style), bugs
