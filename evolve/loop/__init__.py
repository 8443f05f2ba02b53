"""The loop controller: couples the weight and prompt levers over shared rollouts."""

from evolve.loop.config import GenerationSeeds, LoopConfig

__all__ = ["GenerationSeeds", "LoopConfig"]
