"""Demonstration sets: verified successes of training tasks, rendered as few-shot examples into the
``demos`` component.

The one renderer and the one picker, shared by the offline reflector's ``swap-demos`` edit and the
evolver's demonstration challengers (``demo_challengers``): a set is ``max_demos`` entries drawn from the
reflective dataset's ``demo_pool`` (evolve/prompt/reflective_dataset.py ``successes_for_demos``: passed,
purpose "train", untruncated, unflagged, each field at most ``max_field_chars`` and never cut), so no
held-out task's solution can enter a prompt, and the draw is the step's seeded rng (replay draws it again).
"""

from __future__ import annotations

import random

from evolve.prompt.candidate import Candidate

DEMO_HEADER = "Example task:"


def render_demos(demos: list[dict]) -> str:
    return "\n\n".join(f"{DEMO_HEADER}\n{d['inputs'].strip()}\nSolution:\n{d['output'].strip()}" for d in demos)


def pick_demos(pool: list[dict], k: int, rng: random.Random) -> list[dict]:
    return rng.sample(pool, min(k, len(pool)))


def demo_set_proposal(parent: Candidate, pool: list[dict], k: int, rng: random.Random,
                      max_chars: int) -> tuple[dict[str, str], str] | None:
    """(components, rationale) of the parent with a fresh demonstration set, or None when the pool gives
    nothing new. Demonstrations are dropped from the end until the component fits ``max_chars``."""
    demos = pick_demos(pool, k, rng)
    while demos and len(render_demos(demos)) > max_chars:
        demos.pop()
    text = render_demos(demos)
    if not demos or text == parent.components.get("demos", ""):
        return None
    why = "demos from verified successes on training tasks " + ", ".join(d["task_id"] for d in demos)
    return parent.with_component("demos", text).components, why
