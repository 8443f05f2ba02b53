"""The update's forward with each distinct prompt computed once, however many completions share it (issue 36).

A GRPO group is one prompt and G completions (G / 2 a prompt arm once a challenger is in the pool). The
per-row forward (``updater.completion_logprobs``, TRL's layout) runs ``prompt + completion`` for every row,
so a prompt of P tokens is computed, and back-propagated, G times. Here each run of adjacent rows with the
same prompt ids (a *unit*) runs its prompt once, batch 1, keeping its KV cache and its last hidden state;
every micro-batch then runs only its completions against those caches (left-padded to the longest prompt
of the micro-batch, the padding masked out), and the hidden state that predicts each completion's first
token is the prompt's last one. With the Qwen 0.5B on humaneval-chat the prompts were 45% of the update's
input tokens (``loop_throughput.json``), so the model FLOPs of a 4-row unit fall by about a third.

Gradients: under grad the cached keys, values and last hidden state are handed to the completions as
detached leaves, so each micro-batch's backward stops there and accumulates their gradients; when the
unit's last row has been back-propagated, one backward runs through the prompt's own graph with those
accumulated gradients (``release``). The chain rule gives the per-row forward's gradients: each row's
contribution through the prompt is summed, once, instead of G times. Micro-batches are the per-row path's
(``grpo.micro_batch_size`` rows in order), so every loss denominator is unchanged.

Departure from TRL (and from the per-row path): the completion tokens are computed against a cache rather
than inside one forward, so log-probs and gradients differ from the per-row forward by float rounding
(checked on a real model in tests/policy/test_prompt_sharing.py). A checkpoint records which forward its
run used (``resolved["update_forward"]``) and one recording none keeps the per-row forward, so recorded runs
resume and replay under their own numerics; models below ``SHARED_PROMPT_MIN_PARAMS`` (the embedded gym
model, the tests' random models) keep the per-row forward, so their recorded figures stay reproducible.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from evolve.policy.chunked_logprobs import LOGITS_BUDGET, body_and_head, sliced_head_logprobs
from evolve.policy.loss import token_logprobs

SHARED_PROMPT = "shared-prompt"
PER_ROW = "per-row"
SHARED_PROMPT_MIN_PARAMS = 10_000_000  # as the HF backend's shared prefill: below it a forward costs less than a call


def default_update_forward(model) -> str:
    """The update's forward for a fresh policy; a checkpoint keeps its run's (``load_policy``)."""
    if body_and_head(model) is None:
        return PER_ROW
    return SHARED_PROMPT if sum(p.numel() for p in model.parameters()) >= SHARED_PROMPT_MIN_PARAMS else PER_ROW


def prompt_units(prompts: list[list[int]]) -> list[int]:
    """The unit index of every row: adjacent rows with identical prompt ids share one."""
    units: list[int] = []
    for i, p in enumerate(prompts):
        units.append(units[-1] if i and p == prompts[i - 1] else (units[-1] + 1 if units else 0))
    return units


@dataclass
class _Prompt:
    length: int
    keys: list[torch.Tensor]  # per layer (1, kv_heads, P, head_dim): what the completions read
    values: list[torch.Tensor]
    last: torch.Tensor  # (1, hidden): predicts the completion's first token
    graph: list[torch.Tensor] | None  # under grad: the tensors the leaves above were detached from


class PromptSharing:
    """Completion log-probs of ``rows`` (in order), each unit's prompt forwarded once.

    Use: ``logprobs(start, comp, cmask)`` for each micro-batch in row order, its backward, then
    ``release(start + rows)``; under grad, ``release`` back-propagates every prompt whose rows are all done."""

    def __init__(self, model, prompts: list[list[int]], temperature: float, budget: int = LOGITS_BUDGET):
        split = body_and_head(model)
        if split is None:
            raise ValueError("the shared-prompt forward needs a causal LM with a decoder body and an output head")
        self.body, self.head = split
        self.prompts = prompts
        self.units = prompt_units(prompts)
        self.last_row = {u: i for i, u in enumerate(self.units)}
        self.temperature = temperature
        self.budget = budget
        self.live: dict[int, _Prompt] = {}
        self.device = next(model.parameters()).device
        # transformers >= 5.2x names the forward's cache ``cache`` (``past_key_values`` deprecated); vLLM's
        # environment pins an older one that knows only ``past_key_values`` and drops an unknown keyword
        params = inspect.signature(self.body.forward).parameters
        self.cache_kwarg = "cache" if "cache" in params else "past_key_values"

    def _prompt(self, unit: int, row: int) -> _Prompt:
        if unit in self.live:
            return self.live[unit]
        ids = torch.tensor([self.prompts[row]], dtype=torch.long, device=self.device)
        cache = DynamicCache(config=self.body.config)
        out = self.body(input_ids=ids, use_cache=True, **{self.cache_kwarg: cache})
        if cache.get_seq_length() != ids.size(1):
            raise RuntimeError(f"the decoder did not fill the KV cache it was given as {self.cache_kwarg!r}")
        keys = [layer.keys for layer in cache.layers]
        values = [layer.values for layer in cache.layers]
        last = out.last_hidden_state[:, -1, :]
        graph = None
        if torch.is_grad_enabled():
            graph = [*keys, *values, last]
            keys, values = [k.detach().requires_grad_() for k in keys], [v.detach().requires_grad_() for v in values]
            last = last.detach().requires_grad_()
        state = self.live[unit] = _Prompt(ids.size(1), keys, values, last, graph)
        return state

    def logprobs(self, start: int, comp: torch.Tensor, cmask: torch.Tensor) -> torch.Tensor:
        """(B, C) log-probs of the completions of rows ``start .. start + B`` (right-padded, as collated)."""
        b, c = comp.shape
        states = [self._prompt(self.units[start + i], start + i) for i in range(b)]
        width = max(s.length for s in states)

        def stacked(tensors: list[torch.Tensor]) -> torch.Tensor:  # left-padded to the longest prompt
            return torch.cat([F.pad(t, (0, 0, width - s.length, 0)) for t, s in zip(tensors, states, strict=True)])

        layers = [(stacked([s.keys[k] for s in states]), stacked([s.values[k] for s in states]))
                  for k in range(len(states[0].keys))]
        cache = DynamicCache(ddp_cache_data=layers, config=self.body.config)
        prefix = torch.zeros((b, width), dtype=cmask.dtype, device=cmask.device)
        for i, s in enumerate(states):
            prefix[i, width - s.length:] = 1
        lengths = torch.tensor([s.length for s in states], device=comp.device)
        pos = lengths[:, None] + torch.arange(c, device=comp.device)[None, :]
        hidden = self.body(input_ids=comp, attention_mask=torch.cat([prefix, cmask], dim=1), position_ids=pos,
                           use_cache=True, **{self.cache_kwarg: cache}).last_hidden_state
        first = torch.cat([s.last for s in states])[:, None, :]
        predicting = torch.cat([first, hidden[:, :-1, :]], dim=1)
        if b * c * self.head.weight.shape[0] * 4 > self.budget:  # a 152k vocabulary: the head in slices
            return sliced_head_logprobs(self.head, predicting, comp, self.temperature, self.budget)
        return token_logprobs(self.head(predicting), comp, self.temperature)

    def release(self, done: int) -> None:
        """Rows before ``done`` are back-propagated: run each finished prompt's own backward, then drop it."""
        for unit in [u for u in self.live if self.last_row[u] < done]:
            state = self.live.pop(unit)
            if state.graph is None:
                continue
            leaves = [*state.keys, *state.values, state.last]
            pairs = [(g, leaf.grad) for g, leaf in zip(state.graph, leaves, strict=True) if leaf.grad is not None]
            if pairs:
                torch.autograd.backward([g for g, _ in pairs], [d for _, d in pairs])
