"""Prompt evolution: candidates, reflection (offline / any LM / replay), Pareto selection (gepa).

Stepwise API for the loop::

    reflector = make_reflector(config, recorder)
    ev = PromptEvolver(config, reflector, seed_candidate)
    parent = ev.select_parent(rng)
    for p in ev.propose(parent, rollouts, rng): ...   # evaluate, ev.accept(...), ev.observe_val(...)
    ev.current()
"""

from evolve.prompt.candidate import Candidate, render_messages
from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.evolver import PromptEvolver, Proposal
from evolve.prompt.recorder import LMRecorder, MemoryRecorder, NullRecorder, ReplayRecorder, StoreRecorder
from evolve.prompt.reflect import Draft, Reflector, make_reflector
from evolve.prompt.reflective_dataset import ReflectiveDataset, build_reflective_dataset
from evolve.prompt.seed import load_seed_prompt

__all__ = [
    "Candidate", "Draft", "LMRecorder", "MemoryRecorder", "NullRecorder", "PromptEvolutionConfig",
    "PromptEvolver", "Proposal", "Reflector", "ReflectiveDataset", "ReplayRecorder", "StoreRecorder",
    "build_reflective_dataset", "load_seed_prompt", "make_reflector", "render_messages",
]
