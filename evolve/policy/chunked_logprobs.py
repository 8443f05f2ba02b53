"""Completion log-probs without the whole batch's full-vocabulary logits at once.

The update needs log softmax(logits / T) only at the sampled token. Asking the model for logits
over every completion position materialises B x C x V floats: a micro-batch of 8 rows x 512 tokens
of a 151,936 vocabulary is 1.2 GB in bf16, 2.5 GB as float32, and the log-softmax, its backward and
the temperature division each add as much. Here the decoder body runs once, and the output head plus
log-softmax run over slices of the completion positions, each under activation checkpointing, so
forward and backward hold one slice's (B, L, V) logits at a time (``LOGITS_BUDGET`` bytes as float32).

Departure from TRL: TRL 1.16 computes the logits of the whole micro-batch and then saves memory in
the log-softmax (``selective_log_softmax``: logsumexp row by row); its ``_get_per_token_logps``
bounds memory by splitting the batch into row groups. Here the head itself is sliced over positions
and recomputed in the backward, which bounds peak memory independently of rows x completion length.

Used only when the whole logits would exceed the budget: smaller models (the tiny ones, the random
test models) keep the single head call, so their numbers stay bit-identical to before.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from evolve.policy.loss import token_logprobs

LOGITS_BUDGET = 256 << 20  # bytes of float32 logits per head slice


def body_and_head(model):
    """(decoder body, output head) of an HF causal LM (through a PEFT wrapper, whose LoRA layers
    are injected in place, so the body still applies them); None when the model has no such split."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    get_decoder = getattr(base, "get_decoder", None)
    get_head = getattr(base, "get_output_embeddings", None)
    if get_decoder is None or get_head is None:
        return None
    body, head = get_decoder(), get_head()
    if body is None or head is None or body is base:
        return None
    return body, head


def slice_len(rows: int, vocab: int, budget: int = LOGITS_BUDGET) -> int:
    """Completion positions per head slice, so rows x slice x vocab float32 logits fit ``budget``."""
    return max(1, budget // (rows * vocab * 4))


def _slice_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    # contiguous: a frozen head's matmul on a strided 3-D input copies the weight per row (head_input.py)
    return token_logprobs(head(hidden.contiguous()), targets, temperature)


def chunked_completion_logprobs(body, head, ids, attn, pos, comp, temperature: float,
                                budget: int = LOGITS_BUDGET) -> torch.Tensor:
    """(B, C) log-probs of ``comp`` (the last C tokens of ``ids``), the head applied slice by slice."""
    c = comp.size(1)
    hidden = body(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state[:, -(c + 1):-1, :]
    return sliced_head_logprobs(head, hidden, comp, temperature, budget)


def sliced_head_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float,
                         budget: int = LOGITS_BUDGET) -> torch.Tensor:
    """(B, C) log-probs of ``targets`` from the hidden states that predict them, the head applied slice by slice."""
    c = targets.size(1)
    step = slice_len(hidden.size(0), head.weight.shape[0], budget)
    grad = torch.is_grad_enabled()
    out = []
    for s in range(0, c, step):
        h, t = hidden[:, s:s + step, :], targets[:, s:s + step]
        if grad:  # the backward recomputes this slice's logits instead of keeping them
            out.append(checkpoint(_slice_logprobs, head, h, t, temperature, use_reentrant=False))
        else:
            out.append(_slice_logprobs(head, h, t, temperature))
    return torch.cat(out, dim=1)
