"""The built-in single-turn environments: the tiny-coder gym, its hard tier, HumanEval, and the
chat renderings of both. Each is a ``SuiteEnv`` whose ``load`` gives the two splits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evolve.env.base import EnvReply, EpisodeState, Verifying
from evolve.env.render import render_messages
from evolve.verification.types import Task


@dataclass
class SuiteEnv:
    """A single-turn environment over a fixed task suite: one policy turn, judged by the verifier."""

    name: str
    load: Callable[[], dict[str, list[Task]]]
    chat: bool = False  # replies are chat answers: the verifier takes them apart first
    record: dict | None = None  # what the run config records about the split (``suite_split``)
    max_turns: int = 1

    def splits(self) -> dict[str, list[Task]]:
        return self.load()

    def first_messages(self, components: dict[str, str], task: Task) -> list[dict]:
        return render_messages(components, task)

    def wrap_verifier(self, verifier: Verifying) -> Verifying:
        if not self.chat:
            return verifier
        from evolve.verification.reply_verifier import ReplyVerifier

        return ReplyVerifier(verifier)

    def respond(self, verifier: Verifying, states: list[EpisodeState]) -> list[EnvReply]:
        return [EnvReply(None) for _ in states]  # single-turn: the first reply ends the episode


def _gym(hard: bool) -> dict[str, list[Task]]:
    from evolve.gym import load_gym, load_tier

    train, heldout = load_gym("train", seed=0), load_gym("heldout", seed=0)
    if hard:
        train, heldout = load_tier("hard", train), load_tier("hard", heldout)
    return {"train": train, "heldout": heldout}


def _humaneval() -> dict[str, list[Task]]:
    from evolve.verification import load_humaneval

    tasks = load_humaneval()
    order = np.random.default_rng(0).permutation(len(tasks))
    return {"train": [tasks[i] for i in order[40:]], "heldout": [tasks[i] for i in order[:40]]}


def tiny_coder(**_options) -> SuiteEnv:
    return SuiteEnv("tiny-coder", lambda: _gym(False))


def tiny_coder_hard(**_options) -> SuiteEnv:
    return SuiteEnv("tiny-coder-hard", lambda: _gym(True))


def humaneval(**_options) -> SuiteEnv:
    return SuiteEnv("humaneval", _humaneval)


def tiny_coder_chat(split_seed: int = 0, heldout_fraction: float = 0.25, **_options) -> SuiteEnv:
    from evolve.gym.chat import load_chat_suite

    return SuiteEnv("tiny-coder-chat", lambda: load_chat_suite("tiny-coder-chat", split_seed, heldout_fraction),
                    chat=True)


def humaneval_chat(split_seed: int = 0, heldout_fraction: float = 0.25, **_options) -> SuiteEnv:
    from evolve.gym.chat import humaneval_split, load_chat_suite

    _train, held = humaneval_split(split_seed, heldout_fraction)
    record = {"suite_split": {"split_seed": split_seed, "heldout_fraction": heldout_fraction, "heldout": held}}
    return SuiteEnv("humaneval-chat", lambda: load_chat_suite("humaneval-chat", split_seed, heldout_fraction),
                    chat=True, record=record)
