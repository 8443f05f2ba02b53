"""Named parameters as an inference engine (vLLM) expects them; LoRA adapters merged in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def merged_named_params(model) -> Iterator[list[tuple[str, object]]]:
    """(name, tensor) with HF names; for a peft model, the adapter is merged for the duration.

    As TRL's vLLM sync: merge, strip the peft prefixes, skip lora_* tensors, unmerge afterwards.
    """
    is_peft = hasattr(model, "merge_adapter") and hasattr(model, "peft_config")
    if is_peft:
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
            model.unmerge_adapter()
