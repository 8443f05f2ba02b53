"""BootstrapConfig: everything that determines the tiny-coder base model (and its measurement)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from evolve.errors import ConfigError
from evolve.util.config_model import ConfigModel, validate_as
from evolve.util.hashing import content_hash


class BootstrapConfig(ConfigModel):
    """How `evolve bootstrap` builds the default model. Same config => identical tokenizer and weights."""

    preset_name: str = Field("default", description="The preset it started from (informational).")
    seed: int = Field(0, description="Seeds model init, corpus sampling and batch order.")
    gym_seed: int = Field(0, description="Task seed of the gym (which variants / inputs).")
    # tokenizer
    vocab_size: int = Field(512, ge=300, description="BPE vocabulary incl. 5 special tokens.")
    tokenizer_docs: int = Field(3000, ge=1, description="Corpus documents the BPE is trained on.")
    # model (Qwen2 architecture from config)
    hidden_size: int = Field(128, ge=1, description="Model width d.")
    num_layers: int = Field(4, ge=1, description="Transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads.")
    num_kv_heads: int = Field(4, ge=1, description="Key/value heads (GQA when < num_heads).")
    intermediate_size: int = Field(384, ge=1, description="MLP width.")
    context: int = Field(256, ge=1, description="Max positions (prompt + completion must fit).")
    # SFT (fixed step count, not a wall-clock budget, so the result is deterministic)
    steps: int = Field(900, ge=1, description="Optimizer steps.")
    batch_size: int = Field(4, ge=1, description="Packed sequences per step (small batches, more updates: better per "
        "CPU-second).")
    seq_len: int = Field(512, ge=1, description="Tokens per packed sequence: whole documents (each <= context), "
        "positions restart.")
    lr: float = Field(3e-3, gt=0, description="Peak learning rate (AdamW).")
    warmup_steps: int = Field(50, description="Linear warm-up, then cosine to min_lr_ratio * lr.")
    min_lr_ratio: float = Field(0.1, description="Floor of the cosine schedule.")
    weight_decay: float = Field(0.1, description="AdamW decoupled weight decay.")
    beta1: float = Field(0.9, description="AdamW beta1.")
    beta2: float = Field(0.95, description="AdamW beta2.")
    grad_clip: float = Field(1.0, description="Global gradient-norm clip.")
    threads: int = Field(1, ge=1, description="Torch threads (1: OpenMP spin-waits on 2 shared cores).")
    # teacher: per-mode bug rates when the mode applies and its note is absent
    bug_empty: float = Field(0.35, ge=0, le=1, description="EMPTY: missing empty-input guard.")
    bug_div: float = Field(0.35, ge=0, le=1, description="DIV: `/` for `//`.")
    bug_off1: float = Field(0.35, ge=0, le=1, description="OFF1: range misses the last number / pair.")
    bug_cmp: float = Field(0.9, ge=0, le=1, description="CMP: strict comparison for \"at least k\" (rare fix: "
        "all-fail groups).")
    # system-message lines of corpus documents (0..max_system_lines, shuffled)
    p_seed_instruction: float = Field(0.6, ge=0, le=1, description="The seed instruction appears.")
    p_relevant_note: float = Field(0.4, ge=0, le=1, description="Each applicable mode's note appears (teacher then "
        "never makes it).")
    p_irrelevant_note: float = Field(0.1, ge=0, le=1, description="Each non-applicable note appears (no effect).")
    p_distractor: float = Field(0.1, ge=0, le=1, description="Each distractor line appears (no effect).")
    max_system_lines: int = Field(4, description="Cap on system lines per document.")
    # measurement (held-out, real sandboxed verifier)
    measure: bool = Field(True, description="Measure pass@k and per-line effects after training.")
    eval_tasks: int = Field(80, ge=1, description="Held-out tasks in the measurement subset.")
    eval_samples: int = Field(16, ge=1, description="Samples per task for the base prompt (pass@1, pass@eval_samples).")
    eval_line_samples: int = Field(4, ge=1, description="Samples per task for each \"seed + one line\" prompt.")
    eval_max_new_tokens: int = Field(110, ge=1, description="Completion budget (the longest teacher answer is about "
        "90 tokens).")
    eval_seed: int = Field(0, description="Sampling seed of the measurement.")
    eval_batch: int = Field(256, ge=1, description="Sequences per generate call.")

    @model_validator(mode="after")
    def _shape(self) -> BootstrapConfig:
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError("hidden_size must divide by num_heads, and num_heads by num_kv_heads")
        return self

    @classmethod
    def preset(cls, name: str | None) -> BootstrapConfig:
        name = name or "default"
        if name not in PRESETS:
            raise ConfigError(f"unknown bootstrap preset {name!r}; expected one of {sorted(PRESETS)}")
        return cls(preset_name=name, **PRESETS[name])

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BootstrapConfig:
        """A preset (key ``preset``, default "default") with overrides; unknown keys are rejected."""
        d = dict(d or {})
        base = cls.preset(d.pop("preset", None))
        unknown = sorted(set(d) - set(cls.model_fields))
        if unknown:
            raise ConfigError(f"unknown bootstrap config keys {unknown}")
        return validate_as(cls, {**base.to_dict(), **d}, "bootstrap config")

    @classmethod
    def from_toml(cls, path: str | Path) -> BootstrapConfig:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"bootstrap config not found: {path}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: invalid TOML: {e}") from None
        return cls.from_dict(data.get("bootstrap", data))

    def bug_rates(self) -> dict[str, float]:
        return {"EMPTY": self.bug_empty, "DIV": self.bug_div, "OFF1": self.bug_off1, "CMP": self.bug_cmp}

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def build_hash(self) -> str:
        """Identity of the built model: every field (the measurement is part of the artifact)."""
        return content_hash(self.to_dict())[:12]


PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    # CI: a much smaller model and corpus; runs the same code end to end in about a minute.
    "ci": dict(vocab_size=384, tokenizer_docs=600, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=2,
               intermediate_size=192, steps=200, batch_size=4, seq_len=512, lr=3e-3, warmup_steps=20,
               eval_tasks=12, eval_samples=4, eval_line_samples=2, eval_max_new_tokens=80),
}
