"""Named parameters as an inference engine (vLLM) expects them; LoRA adapters merged in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def _lora_base_params(model) -> list:
    """The base-layer parameters a peft merge writes into (every LoRA-wrapped layer's weight and bias)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [p for m in model.modules() if isinstance(m, BaseTunerLayer)
            for p in m.get_base_layer().parameters(recurse=False)]


@contextmanager
def merged_named_params(model) -> Iterator[list[tuple[str, object]]]:
    """(name, tensor) with HF names; for a peft model, the adapter is merged for the duration.

    As TRL's vLLM sync: merge, strip the peft prefixes, skip lora_* tensors, unmerge afterwards.
    Departure from TRL: the base weights are copied before the merge and put back after it, bit for bit.
    peft's merge then unmerge (W + BA - BA) is not the identity in bf16: each sync would round the frozen
    base weights a little further from the checkpoint on disk (measured: the weights hash changed after
    one merge/unmerge of SmolLM2 in bf16, so a resumed LoRA run's hash never matched the saved run's).
    """
    is_peft = hasattr(model, "merge_adapter") and hasattr(model, "peft_config")
    saved = []
    if is_peft:
        saved = [(p, p.data.clone()) for p in _lora_base_params(model)]
        model.merge_adapter()
    try:
        out = []
        for name, param in model.named_parameters():
            if is_peft:
                if "lora_" in name or "original_module" in name:
                    continue
                name = name.removeprefix("base_model.model.").replace(".base_layer", "")
                name = name.replace("modules_to_save.default.", "")
            out.append((name, param.data))
        yield out
    finally:
        if is_peft:
            model.unmerge_adapter()  # peft's bookkeeping (merged flags); the data is restored just below
            for p, data in saved:
                p.data.copy_(data)
