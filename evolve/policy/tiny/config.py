"""BootstrapConfig: everything that determines the tiny-coder base model (and its measurement)."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolve.errors import ConfigError
from evolve.util.hashing import content_hash


@dataclass(frozen=True)
class BootstrapConfig:
    """How `evolve bootstrap` builds the default model. Same config => identical tokenizer and weights."""

    preset_name: str = "default"  # the preset it started from (informational)
    seed: int = 0  # seeds model init, corpus sampling and batch order
    gym_seed: int = 0  # task seed of the gym (which variants / inputs)
    # tokenizer
    vocab_size: int = 512  # BPE vocabulary incl. 5 special tokens
    tokenizer_docs: int = 3000  # corpus documents the BPE is trained on
    # model (Qwen2 architecture from config)
    hidden_size: int = 128  # model width d
    num_layers: int = 4  # transformer blocks
    num_heads: int = 4  # attention heads
    num_kv_heads: int = 4  # key/value heads (GQA when < num_heads)
    intermediate_size: int = 384  # MLP width
    context: int = 256  # max positions (prompt + completion must fit)
    # SFT (fixed step count, not a wall-clock budget, so the result is deterministic)
    steps: int = 900  # optimizer steps
    batch_size: int = 4  # packed sequences per step (small batches, more updates: better per CPU-second)
    seq_len: int = 512  # tokens per packed sequence: whole documents (each <= context), positions restart
    lr: float = 3e-3  # peak learning rate (AdamW)
    warmup_steps: int = 50  # linear warm-up, then cosine to min_lr_ratio * lr
    min_lr_ratio: float = 0.1  # floor of the cosine schedule
    weight_decay: float = 0.1  # AdamW decoupled weight decay
    beta1: float = 0.9  # AdamW beta1
    beta2: float = 0.95  # AdamW beta2
    grad_clip: float = 1.0  # global gradient-norm clip
    threads: int = 1  # torch threads (1: OpenMP spin-waits on 2 shared cores)
    # teacher: per-mode bug rates when the mode applies and its note is absent
    bug_empty: float = 0.35  # EMPTY: missing empty-input guard
    bug_div: float = 0.35  # DIV: `/` for `//`
    bug_off1: float = 0.35  # OFF1: range misses the last number / pair
    bug_cmp: float = 0.9  # CMP: strict comparison for "at least k" (rare fix: all-fail groups)
    # system-message lines of corpus documents (0..max_system_lines, shuffled)
    p_seed_instruction: float = 0.6  # the seed instruction appears
    p_relevant_note: float = 0.4  # each applicable mode's note appears (teacher then never makes it)
    p_irrelevant_note: float = 0.1  # each non-applicable note appears (no effect)
    p_distractor: float = 0.1  # each distractor line appears (no effect)
    max_system_lines: int = 4  # cap on system lines per document
    # measurement (held-out, real sandboxed verifier)
    measure: bool = True  # measure pass@k and per-line effects after training
    eval_tasks: int = 80  # held-out tasks in the measurement subset
    eval_samples: int = 16  # samples per task for the base prompt (pass@1, pass@eval_samples)
    eval_line_samples: int = 4  # samples per task for each "seed + one line" prompt
    eval_max_new_tokens: int = 110  # completion budget (the longest teacher answer is about 90 tokens)
    eval_seed: int = 0  # sampling seed of the measurement
    eval_batch: int = 256  # sequences per generate call

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
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(fields))
        if unknown:
            raise ConfigError(f"unknown bootstrap config keys {unknown}")
        values = {}
        for k, v in d.items():
            typ = fields[k].type
            ok = (isinstance(v, bool) if typ == "bool" else
                  isinstance(v, int) and not isinstance(v, bool) if typ == "int" else
                  isinstance(v, (int, float)) and not isinstance(v, bool) if typ == "float" else
                  isinstance(v, str))
            if not ok:
                raise ConfigError(f"bootstrap config key {k!r} must be {typ}, got {v!r}")
            values[k] = float(v) if typ == "float" else v
        cfg = dataclasses.replace(base, **values)
        cfg.validate()
        return cfg

    @classmethod
    def from_toml(cls, path: str | Path) -> BootstrapConfig:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"bootstrap config not found: {path}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: invalid TOML: {e}") from None
        return cls.from_dict(data.get("bootstrap", data))

    def validate(self) -> None:
        rates = (self.bug_empty, self.bug_div, self.bug_off1, self.bug_cmp, self.p_seed_instruction,
                 self.p_relevant_note, self.p_irrelevant_note, self.p_distractor)
        if any(not 0.0 <= r <= 1.0 for r in rates):
            raise ConfigError("bootstrap rates and probabilities must lie in [0, 1]")
        positive = ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size",
                    "context", "steps", "batch_size", "seq_len", "threads", "eval_tasks", "eval_samples",
                    "eval_line_samples", "eval_max_new_tokens", "eval_batch", "tokenizer_docs")
        bad = [k for k in positive if getattr(self, k) <= 0]
        if bad:
            raise ConfigError(f"bootstrap config values must be positive: {bad}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ConfigError("hidden_size must divide by num_heads, and num_heads by num_kv_heads")
        if self.vocab_size < 300 or self.lr <= 0:
            raise ConfigError("need vocab_size >= 300 (bytes + specials) and lr > 0")

    def bug_rates(self) -> dict[str, float]:
        return {"EMPTY": self.bug_empty, "DIV": self.bug_div, "OFF1": self.bug_off1, "CMP": self.bug_cmp}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
