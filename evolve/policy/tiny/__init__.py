"""The embedded tiny-coder model: tokenizer, Qwen2 config, teacher corpus, SFT, measurement.

    from evolve.policy.tiny import ensure_tiny_model, BootstrapConfig
    path = ensure_tiny_model(BootstrapConfig.preset("default"))   # runs/models/tiny-coder-<hash12>/

Heavy libraries (torch, transformers) are imported inside functions.
"""

from evolve.policy.tiny.bootstrap import ensure_tiny_model, is_complete, model_dir, read_manifest
from evolve.policy.tiny.config import PRESETS, BootstrapConfig

__all__ = ["BootstrapConfig", "PRESETS", "ensure_tiny_model", "is_complete", "model_dir", "read_manifest"]
