"""One generated completion, with the token ids and behaviour log-probs an update needs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sample:
    text: str  # the completion, special tokens removed
    prompt_text: str  # the chat messages rendered through the chat template
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)  # includes the EOS token when one was sampled
    # log pi_behaviour(token) per completion token: log softmax(logits / temperature), i.e. the sampling
    # distribution at T before top-p truncation (what the ratio in the loss is taken against).
    # Empty for backends that do not expose them (litellm).
    logprobs: list[float] = field(default_factory=list)
    truncated: bool = False  # hit max_new_tokens without EOS
    finish_reason: str = ""  # "stop" | "length"
