"""Environments: what owns an episode (tasks, first messages, each turn's answer, the end).

``load_environment(name | path, **options)`` gives one; ``evolve.env.episode`` runs episodes
(collect -> verify -> score -> pass@k) for the loop and ``evolve eval`` alike.
"""

from evolve.env.base import Environment, EnvReply, EpisodeState, Generator, PromptLike, Verifying
from evolve.env.registry import ENVIRONMENTS, load_environment, register

__all__ = ["ENVIRONMENTS", "EnvReply", "Environment", "EpisodeState", "Generator", "PromptLike", "Verifying",
           "load_environment", "register"]
