"""The tiny-coder model: a small Qwen2 from config (no hub download)."""

from __future__ import annotations

from evolve.policy.tiny.config import BootstrapConfig


def make_model(cfg: BootstrapConfig, tokenizer):
    """A freshly initialised Qwen2ForCausalLM; seed torch before calling for identical weights."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads, max_position_embeddings=cfg.context,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, use_cache=True,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())
