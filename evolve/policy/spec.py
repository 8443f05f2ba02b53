"""Policy specs: one validated TOML file says which model, how to sample and how to train it.

``PolicySpec.from_toml(path)`` turns any malformed file into one ``ConfigError`` line that names
the file and the first pydantic error, so the CLI prints it without a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evolve.errors import ConfigError
from evolve.util.config_model import validate_as
from evolve.util.toml_files import read_toml

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class LoraSpec(BaseModel):
    """LoRA adapter settings (peft), used when ``finetune = "lora"``."""

    model_config = _FROZEN
    r: int = Field(8, ge=1, description="Rank of the low-rank update.")
    alpha: float = Field(16.0, gt=0, description="Scaling numerator: the update is scaled by alpha / r.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapter input (0 keeps runs deterministic).")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="Module names that get adapters (peft `target_modules`).",
    )


class VllmSpec(BaseModel):
    """Options for the `vllm` (in-process) and `vllm-server` (trl vllm-serve) backends."""

    model_config = _FROZEN
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1, description="Share of GPU memory vLLM may take.")
    max_model_len: int | None = Field(None, ge=16, description="vllm: context length cap (None = the model's).")
    host: str = Field("127.0.0.1", description="vllm-server: host of the `trl vllm-serve` server.")
    port: int = Field(8000, ge=1, le=65535, description="vllm-server: HTTP port of the server.")
    group_port: int = Field(51216, ge=1, le=65535, description="vllm-server: NCCL group port for weight sync.")
    connection_timeout: float = Field(240.0, gt=0, description="vllm-server: seconds to wait for the server.")
    cpu_kv_cache_gib: float = Field(
        1.0, gt=0, description="vllm on CPU: KV-cache size in GiB (vLLM's VLLM_CPU_KVCACHE_SPACE; its own default "
        "sizes the cache from free memory, too much on a shared machine). Ignored on CUDA.")
    enforce_eager: bool | None = Field(
        None, description="vllm: no torch.compile / CUDA graphs. None = eager on CPU (compiling costs minutes "
        "there and was not faster at the loop's batch, benchmarks/generate.py), compiled on CUDA.")
    weight_sync: Literal["nccl", "lora-path"] = Field(
        "nccl", description="vllm-server: how weights reach the server after each update. 'nccl' = TRL's "
        "VLLMClient broadcast (CUDA only); 'lora-path' = the LoRA adapter saved to a folder and loaded by the "
        "server's dynamic-LoRA endpoint (the CPU path; finetune = 'lora' only).")


class LitellmSpec(BaseModel):
    """Options for the `litellm` backend: a model behind an API or an OpenAI-compatible server."""

    model_config = _FROZEN
    model: str = Field("", description="litellm model string, e.g. 'openai/gpt-4o-mini' or 'openai/local'.")
    api_base: str | None = Field(None, description="Base URL of an OpenAI-compatible server (…/v1).")
    api_key_env: str | None = Field(None, description="Name of the env var holding the API key (never the key).")
    timeout: float = Field(120.0, gt=0, description="Seconds per request.")
    num_retries: int = Field(2, ge=0, description="Retries per request on transient errors.")


class SamplingSpec(BaseModel):
    """How completions are sampled."""

    model_config = _FROZEN
    temperature: float = Field(1.0, gt=0, description="Softmax temperature; logprobs are those of this distribution.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass (1.0 = off).")
    max_new_tokens: int = Field(128, ge=1, description="Completion length cap; hitting it marks a sample truncated.")
    chunk_size: int = Field(64, ge=1, description="Max sequences per `generate` call (memory bound).")
    seed_scope: Literal["batch", "task"] = Field(
        "batch", description="hf backend: \"batch\" = one RNG stream per generate() call, seeded by its seed "
        "(as always); \"task\" = each task's n samples are one stream seeded by (seed, the task's index in the "
        "call), so samples do not depend on how tasks are split between workers (the ray cluster backend "
        "needs it; local and ray then give identical samples).",
    )
    stop_after_code_block: bool = Field(
        False, description="hf and vllm backends: end a completion once it has closed its first ``` code block "
        "(a chat model's explanation after the code is never scored; on CPU it costs as much as the code).",
    )
    stop: tuple[str, ...] = Field(
        (), description="hf, vllm and vllm-server (lora-path) backends: end a completion at the first of these "
        "strings, kept in the completion (an answer graded on its closing tag needs it: '</answer>' for CodeI/O). "
        "Empty: none.",
    )

    @field_validator("stop")
    @classmethod
    def _no_empty_stop(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not s for s in value):
            raise ValueError("an empty stop string would end every completion at its first token")
        return value


class OptimizerSpec(BaseModel):
    """AdamW and its learning-rate schedule."""

    model_config = _FROZEN
    lr: float = Field(1e-4, gt=0, description="Peak learning rate (field notes: 3e-4 collapsed the tiny model).")
    betas: tuple[float, float] = Field((0.9, 0.99), description="AdamW betas.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay.")
    eps: float = Field(1e-8, gt=0, description="AdamW epsilon.")
    grad_clip: float = Field(1.0, ge=0, description="Max global grad norm (0 = no clipping).")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps from 0 to lr.")
    scheduler: Literal["constant", "linear", "cosine"] = Field("constant", description="Decay after warm-up.")
    total_steps: int = Field(1000, ge=1, description="Horizon of linear/cosine decay.")


class GrpoSpec(BaseModel):
    """The GRPO-family update."""

    model_config = _FROZEN
    advantage: Literal["grpo", "dr_grpo", "ngrpo", "gigpo"] = Field(
        "grpo", description="Advantage estimator (gigpo: episode + anchor-state step groups of multi-turn "
        "episodes; on single-turn rollouts it is grpo, or dr_grpo with scale_rewards = 'none').")
    loss_type: Literal["grpo", "bnpo", "dapo", "dr_grpo"] = Field(
        "grpo", description="Token aggregation, as TRL: per-sequence mean | token mean | sum/(L*B)."
    )
    epsilon_low: float = Field(0.2, ge=0, lt=1, description="Lower clip: ratio >= 1 - epsilon_low.")
    epsilon_high: float = Field(0.2, ge=0, description="Upper clip: ratio <= 1 + epsilon_high.")
    beta: float = Field(0.0, ge=0, description="KL coefficient to the reference model (k3 estimator); 0 = none.")
    num_iterations: int = Field(1, ge=1, description="mu: inner epochs over the same rollouts.")
    micro_batch_size: int = Field(16, ge=1, description="Sequences per forward/backward (gradient accumulation).")
    scale_rewards: Literal["group", "none"] = Field(
        "group", description="grpo and gigpo estimators: divide by the group std ('group') or not ('none')."
    )
    eps: float = Field(1e-6, gt=0, description="Added to the std in the denominator (verl: 1e-6).")
    ngrpo_m: int = Field(1, ge=1, description="NGRPO: number of virtual max-reward samples.")
    ngrpo_r_max: float = Field(1.0, description="NGRPO: reward of the virtual samples.")
    gigpo_omega: float = Field(1.0, ge=0, description="GiGPO: weight of the step-level advantage, "
                               "A = A_episode + omega * A_step (paper: 1).")
    gigpo_gamma: float = Field(0.95, ge=0, le=1, description="GiGPO: discount of the step returns within an "
                               "episode (verl-agent: 0.95); < 1 credits earlier success.")
    gigpo_step_rewards: Literal["final", "dense"] = Field(
        "final", description="GiGPO step rewards: 'final' = the episode reward on the last policy turn only; "
        "'dense' = each earlier turn's recorded reward (e.g. visible-test pass fraction) as well.")
    skip_zero_variance: bool = Field(True, description="Skip the forward of groups whose advantages are all 0.")
    old_logprobs: Literal["auto", "behaviour"] = Field(
        "auto", description="pi_old in the ratio: 'auto' as TRL (current log-probs, recomputed once when "
        "num_iterations > 1); 'behaviour' = the sampler's own log-probs (stale or vLLM-sampled rollouts).",
    )


class PolicySpec(BaseModel):
    """A policy: model, fine-tuning mode, generation backend, sampling, optimizer and GRPO settings."""

    model_config = _FROZEN
    name: str = Field("", description="Human-readable name (defaults to the file stem).")
    model: str = Field(
        "tiny-coder", description="'tiny-coder' (the embedded model), a local HF folder, a .gguf file, "
        "'package:MODULE/file.gguf' (a GGUF shipped in an installed package), "
        "'chunks:DIST{A..B}==VERSION' (a GGUF assembled from ordered chunk packages), or a hub id.",
    )
    model_sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="sha256 of the model file (a GGUF, or the whole file a "
        "'chunks:' model assembles to); required for 'chunks:', checked for a GGUF when given.")
    dtype: Literal["auto", "auto-bf16", "float32", "bfloat16", "float16"] = Field(
        "float32", description="Weights dtype; 'auto' = float32 on CPU, bfloat16 on CUDA; 'auto-bf16' = bfloat16 "
        "on CUDA and on CPUs with AMX or AVX512-BF16, else float32 (the resolved dtype is recorded in each "
        "checkpoint's policy.json, and a resumed run keeps it).")
    device: str = Field(
        "auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$",
        description="Where the policy, reference model and update run: 'auto' = CUDA when present, else CPU.",
    )
    finetune: Literal["full", "lora"] = Field("full", description="Full fine-tuning or a LoRA adapter (peft).")
    lora: LoraSpec = Field(default_factory=LoraSpec, description="LoRA settings (finetune = 'lora').")
    backend: Literal["hf", "vllm", "vllm-server", "litellm"] = Field("hf", description="Generation backend.")
    vllm: VllmSpec = Field(default_factory=VllmSpec, description="vllm / vllm-server options.")
    litellm: LitellmSpec = Field(default_factory=LitellmSpec, description="litellm options.")
    sampling: SamplingSpec = Field(default_factory=SamplingSpec, description="Sampling settings.")
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec, description="Optimizer settings.")
    grpo: GrpoSpec = Field(default_factory=GrpoSpec, description="GRPO-family update settings.")
    bootstrap: dict[str, Any] = Field(
        default_factory=lambda: {"preset": "default"},
        description="For model = 'tiny-coder': settings passed to the tiny-model builder.",
    )
    threads: int = Field(1, ge=1, description="torch CPU threads (1 avoids OpenMP spin-wait outliers on tiny "
                         "models; a 0.5B model in bf16 runs 1.6x faster on 2). Recorded in each checkpoint.")
    seed: int = Field(0, description="Seed for weight init of adapters and the update's RNG.")

    @model_validator(mode="after")
    def _check(self) -> PolicySpec:
        if self.backend == "litellm" and not self.litellm.model:
            raise ValueError("backend 'litellm' needs litellm.model (e.g. 'openai/gpt-4o-mini')")
        if self.model.startswith("chunks:") and not self.model_sha256:
            raise ValueError("a 'chunks:' model needs model_sha256 (the sha256 of the whole assembled file)")
        return self

    @property
    def can_update(self) -> bool:
        """False when the weights live behind an API (litellm): only prompt evolution applies."""
        return self.backend != "litellm"

    @classmethod
    def from_toml(cls, path: str | Path) -> PolicySpec:
        """A spec file; ``extends = "other.toml"`` reads that one first and merges this one over it
        (``evolve.util.toml_files``), so a variant states only its differences."""
        path = Path(path)
        data = read_toml(path, not_found="policy spec not found", malformed="invalid TOML")
        data.setdefault("name", path.stem)
        return cls.from_dict(data, source=str(path))

    def with_model(self, model: str, source: str = "--model") -> PolicySpec:
        """This spec on another model (a local folder, a .gguf file or a hub id): every other setting
        kept, the name taken from the model, and the old model's file hash dropped."""
        name = Path(model.rstrip("/")).name or model
        data = {**self.model_dump(mode="json"), "model": model, "model_sha256": None, "name": name}
        return PolicySpec.from_dict(data, source=source)

    @classmethod
    def from_recorded(cls, data: dict, source: str = "recorded policy spec") -> PolicySpec:
        """A spec a run or checkpoint recorded. One recorded while ``sampling.n`` existed drops it: the
        loop never read it (G was always ``samples_per_task``), so nothing it ran changes."""
        sampling = data.get("sampling")
        if isinstance(sampling, dict) and "n" in sampling:
            data = {**data, "sampling": {k: v for k, v in sampling.items() if k != "n"}}
        return cls.from_dict(data, source=source)

    @classmethod
    def from_dict(cls, data: dict, source: str = "policy spec") -> PolicySpec:
        sampling = data.get("sampling")
        if isinstance(sampling, dict) and "n" in sampling:  # one knob per meaning
            raise ConfigError(f"{source}: sampling.n is gone: G (samples per task) is the loop's samples_per_task "
                              "(--loop.samples_per_task); `evolve eval` takes --samples")
        return validate_as(cls, data, source)
