"""A rollout: one sampled completion for one task, with its verdict.

Shared by the loop (which owns rollouts), the weight update (which reads
reward/advantage/token ids) and reflection (which reads traces).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evolve.verification.types import VerifyResult

PURPOSES = ("train", "candidate", "heldout", "guided")  # guided: a guided retry (evolve/loop/guided.py)


@dataclass
class Turn:
    """One message of a multi-turn episode after the first messages (empty list = single-turn).

    Policy turns have role "assistant" and a ``token_span`` into ``Rollout.completion_ids``;
    environment turns (role "user" or "tool") are masked out of the loss.
    """

    role: str
    content: str
    reward: float | None = None  # dense reward the environment measured after this policy turn
    observation_hash: str | None = None  # hash of the state the policy acted on (GiGPO anchor)
    token_span: tuple[int, int] | None = None  # [start, end) in completion_ids, policy turns only
    advantage: float | None = None  # per-turn advantage (GiGPO); None = the rollout's advantage


@dataclass
class Rollout:
    task_id: str
    group: int  # index of the task's group within the batch (G samples share it)
    sample_index: int
    prompt_version: str
    weights_version: str
    messages: list[dict]  # the chat messages the policy was given
    prompt_text: str  # the messages rendered through the chat template
    completion: str
    result: VerifyResult | None = None
    reward: float = 0.0
    advantage: float | None = None
    purpose: str = "train"
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # per completion token, behaviour policy
    truncated: bool = False  # hit max_new_tokens without EOS
    turns: list[Turn] = field(default_factory=list)  # the whole transcript after messages; [] = one turn
    completion_mask: list[int] = field(default_factory=list)  # 1 = policy token (trained); [] = all 1
    guidance: list[str] = field(default_factory=list)  # guidance sources of a guided retry; [] = none
    # The prompt the completion was sampled under when the update trains it under another one
    # (evolve/loop/recontext.py): the updater's pi_old is computed there, an importance ratio; [] = prompt_ids.
    sampled_prompt_ids: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.result and self.result.passed)
