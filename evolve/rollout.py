"""A rollout: one sampled completion for one task, with its verdict.

Shared by the loop (which owns rollouts), the weight update (which reads
reward/advantage/token ids) and reflection (which reads traces).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evolve.verification.types import VerifyResult

PURPOSES = ("train", "candidate", "heldout")


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

    @property
    def passed(self) -> bool:
        return bool(self.result and self.result.passed)
