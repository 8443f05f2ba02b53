"""tiny-coder: a seeded procedural gym of small Python function tasks.

``load_gym(split, seed, n)`` returns :class:`~evolve.verification.types.Task` lists:
thousands of train tasks and a few hundred held-out ones whose compositions never
appear in train. See ``evolve.gym.grammar`` for the task grammar, ``notes`` for the
teacher's bug modes and the instruction lines that switch them off.
"""

from evolve.gym.generate import SUITE, GymParams
from evolve.gym.notes import BUG_MODES, DISTRACTORS, NOTES, SEED_INSTRUCTION
from evolve.gym.suite import load_gym, load_suite
from evolve.gym.teacher import teacher_solution
from evolve.gym.tiers import TIERS, load_tier

__all__ = ["BUG_MODES", "DISTRACTORS", "NOTES", "SEED_INSTRUCTION", "SUITE", "GymParams", "load_gym",
           "load_suite", "load_tier", "TIERS", "teacher_solution"]
