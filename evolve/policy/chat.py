"""Rendering chat messages into prompt text and ids through the tokenizer's chat template."""

from __future__ import annotations


def render_prompt(tokenizer, messages: list[dict]) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    # No template (a base model): a plain, documented fallback so generation still works.
    parts = [f"{m['role']}: {m['content']}" for m in messages]
    return "\n".join(parts) + "\nassistant: "


def encode_prompt(tokenizer, messages: list[dict]) -> tuple[str, list[int]]:
    text = render_prompt(tokenizer, messages)
    return text, tokenizer(text, add_special_tokens=False)["input_ids"]


def eos_ids(tokenizer, model=None) -> list[int]:
    """Every id that ends a completion: the tokenizer's eos plus the model's generation_config eos."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gc = getattr(model, "generation_config", None)
    extra = getattr(gc, "eos_token_id", None) if gc is not None else None
    if isinstance(extra, int):
        ids.add(extra)
    elif extra:
        ids.update(int(i) for i in extra)
    return sorted(ids)
