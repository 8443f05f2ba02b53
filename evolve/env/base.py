"""The environment seam: one Protocol for what owns an episode, and the ones it talks to.

An environment (in the spirit of gepa's ``GEPAAdapter`` and PrimeIntellect verifiers'
environments) owns the episode from the first messages to the final reward: its name, its
splits, how a prompt candidate becomes the first messages, how each policy turn is answered,
and when the episode ends. The final reward is the verifier's verdict on the last policy turn
(hidden tests); the episode path (``evolve.env.episode``) drives it.

Nothing here imports torch, the policy or the prompt package: the loop hands in objects that
satisfy ``Generator`` (a Policy), ``Verifying`` (a Verifier) and ``PromptLike`` (a Candidate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from evolve.verification.types import Task, VerifyResult


@dataclass
class EnvReply:
    """The environment's answer to one policy turn.

    ``message``: the next user/tool message (None when the episode ends); ``reward``: the dense
    reward measured after the turn (e.g. the visible-test pass fraction), None if none; ``done``.
    """

    message: str | None
    reward: float | None = None
    done: bool = True
    role: str = "user"


@dataclass
class EpisodeState:
    """What an environment sees when it answers a turn: the task, the conversation so far
    (first messages, then every turn), the policy's latest reply and the turn's number (1-based)."""

    task: Task
    messages: list[dict]
    reply: str
    turn: int


class Verifying(Protocol):
    """A verifier (``evolve.verification.Verifier`` or ``ReplyVerifier``)."""

    def verify_batch(self, pairs: list[tuple[Task, str]]) -> list[VerifyResult]: ...

    def close(self) -> None: ...


class Generator(Protocol):
    """What the episode path needs of a policy: sampled replies to chat conversations."""

    def generate(self, prompts: list[list[dict]], n: int | None = None, seed: int = 0) -> list[list[Any]]: ...


class PromptLike(Protocol):
    """A prompt candidate: named text components and a content-hash id."""

    @property
    def id(self) -> str: ...

    components: dict[str, str]


@runtime_checkable
class Environment(Protocol):
    """One extension point for tasks. A new environment is one module exposing
    ``load_environment(**options) -> Environment`` (see ``evolve.env.registry``)."""

    name: str
    max_turns: int  # 1 = single-turn: ``respond`` is never called

    def splits(self) -> dict[str, list[Task]]:
        """{"train": [...], "heldout": [...]}: every task of each split, deterministic."""
        ...

    def first_messages(self, components: dict[str, str], task: Task) -> list[dict]:
        """The chat messages a prompt candidate's components give for ``task``."""
        ...

    def wrap_verifier(self, verifier: Verifying) -> Verifying:
        """The verifier this environment's replies are judged by (chat suites take replies apart first)."""
        ...

    def respond(self, verifier: Verifying, states: list[EpisodeState]) -> list[EnvReply]:
        """Answer the latest policy turn of each episode (batched: one sandbox round per turn)."""
        ...
