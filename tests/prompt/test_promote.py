"""An acceptance rule outside the evolver (the loop's non-inferiority rule) can promote a
pool member to be the prompt, and the choice survives a state round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.errors import EvolveError
from evolve.prompt import Candidate, PromptEvolutionConfig, PromptEvolver, make_reflector

LESSONS = str(Path(__file__).resolve().parents[2] / "prompts" / "lessons")
SEED = Candidate({"system": "Write a Python function that solves the task.", "lessons": ""})


def test_promoted_candidate_is_current_even_with_a_lower_validation_mean():
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS)
    ev = PromptEvolver(cfg, make_reflector(cfg), SEED)
    ev.observe_val(SEED, {"a": 1.0, "b": 1.0})
    other = SEED.with_component("lessons", "Include the boundary value k.")
    ev.observe_val(other, {"a": 1.0, "b": 0.5}, parents=[SEED.id])
    assert ev.current().id == SEED.id  # best mean validation score
    ev.promote(other)
    assert ev.current().id == other.id
    back = PromptEvolver.from_state_dict(ev.state_dict(), make_reflector(cfg))
    assert back.current().id == other.id
    with pytest.raises(EvolveError, match="not in the pool"):
        ev.promote(SEED.with_component("lessons", "never proposed"))
