"""The output head gets a contiguous input: a frozen head (LoRA) must not be copied once per row.

PyTorch's ``matmul`` folds a 3-D input into one 2-D ``mm`` only when the input is contiguous or the
weight requires grad; otherwise it runs ``bmm`` with the weight *expanded and copied* once per batch
row. transformers slices the last position out of the prefill (``logits_to_keep=1``:
``hidden[:, -1:, :]``, not contiguous), and under LoRA the head's weight is frozen, so on
Qwen2.5-Coder-0.5B every 32-row prefill copied the 151,936 x 896 head 32 times: 8.1 GB resident
and most of the prefill's time (measured: a random one-layer Qwen2 with that head, peft-wrapped,
bf16, 32 x 175 tokens: peak 9.1 GB and 111 s, against 0.96 GB and 1.9 s unwrapped). The update's
``logits_to_keep=C+1`` slice hit the same path. Copying the (B, k, H) input is a few hundred KB.

Numbers do not change where the old path already folded (a head that requires grad: full fine-tuning,
as the tiny models train): the fold made the same contiguous copy before the same ``mm``.
"""

from __future__ import annotations


def _contiguous(module, args):
    x = args[0] if args else None
    if x is not None and hasattr(x, "is_contiguous") and not x.is_contiguous():
        return (x.contiguous(), *args[1:])
    return None


def contiguous_head_input(model) -> None:
    """Install the pre-hook on ``model``'s output head (through a PEFT wrapper); idempotent."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    if head is None or getattr(head, "_evolve_contiguous", None) is not None:
        return
    head._evolve_contiguous = head.register_forward_pre_hook(_contiguous)  # the handle (benchmarks remove it)
