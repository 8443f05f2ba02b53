"""Resolving a spec's model to weights on disk and loading it (full or LoRA) with its tokenizer."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from evolve.errors import ConfigError, EvolveError
from evolve.policy.head_input import contiguous_head_input
from evolve.policy.spec import PolicySpec
from evolve.util.cpu import cpu_has_bf16, cpu_kind

ADAPTER_CONFIG = "adapter_config.json"


def resolve_model_path(spec: PolicySpec) -> str:
    """'tiny-coder' -> the bootstrapped folder; a GGUF (file or ``package:`` ref) -> its dequantised
    HF folder (cached under runs/models); a local folder -> itself; else the hub id unchanged."""
    from evolve.policy.chunks import is_chunks
    from evolve.policy.sources import chunked_model_dir, dequantised_dir, gguf_file_of

    if is_chunks(spec.model):
        return str(chunked_model_dir(spec.model, spec.model_sha256).absolute())
    gguf = gguf_file_of(spec.model)
    if gguf is not None:
        return str(dequantised_dir(gguf, sha256=spec.model_sha256).absolute())
    if spec.model == "tiny-coder":
        try:
            from evolve.policy.tiny import BootstrapConfig, ensure_tiny_model
        except ImportError as e:
            raise EvolveError(f"the tiny-coder model builder is not available: {e}") from None
        # A preset plus overrides; builds (minutes) on first use, then cached under runs/models/.
        return str(ensure_tiny_model(BootstrapConfig.from_dict(spec.bootstrap), runs_dir=None, progress=True))
    path = Path(spec.model).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ConfigError(f"model folder {path} has no config.json (not an HF model)")
        return str(path)
    if spec.model.startswith((".", "/", "~")):
        raise ConfigError(f"model folder {spec.model} does not exist")
    return spec.model


def warn_if_emulated_bf16(dtype: str, device: str) -> None:
    """An explicit bf16 spec on a CPU without bf16 kernels runs, emulated: say so in one line (stderr).
    'auto-bf16' chooses float32 there instead; an explicit dtype is kept because a user may want it."""
    if dtype == "bfloat16" and not str(device).startswith("cuda") and not cpu_has_bf16():
        print(f"evolve: dtype bfloat16 on a CPU without bf16 kernels ({cpu_kind()}): emulated, several times "
              "slower than float32; dtype = \"auto-bf16\" picks float32 here", file=sys.stderr)


def resolve_dtype_name(name: str, device: str = "cpu") -> str:
    """The concrete dtype a spec's ``dtype`` means on ``device``:
    'auto' = float32 on CPU, bfloat16 on CUDA (unchanged since it was introduced: recorded specs keep it);
    'auto-bf16' = bfloat16 on CUDA and on CPUs with native bf16 (``cpu_has_bf16``), else float32."""
    cuda = str(device).startswith("cuda")
    if name == "auto":
        return "bfloat16" if cuda else "float32"
    if name == "auto-bf16":
        return "bfloat16" if cuda or cpu_has_bf16() else "float32"
    return name


def torch_dtype(name: str, device: str = "cpu"):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16,
            "float16": torch.float16}[resolve_dtype_name(name, device)]


def resolve_device(name: str) -> str:
    """'auto' -> 'cuda' when a CUDA device is present, else 'cpu'; an explicit CUDA device must exist."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for, but torch sees no CUDA device")
    return name


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path)
    except OSError as e:
        raise EvolveError(f"cannot load tokenizer {path} (offline, or not a model): {_first_line(e)}") from None
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(spec: PolicySpec, base_path: str, adapter_dir: str | None = None, full_dir: str | None = None,
               device: str = "cpu", dtype: str | None = None):
    """The trainable model on ``device``: base weights (or a full checkpoint), then the LoRA adapter if any.
    ``dtype``: the concrete dtype (a checkpoint's recorded one); default: the spec's, resolved here."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-load bars would drown the loop's one-line progress

    source = full_dir or base_path
    try:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype(dtype or spec.dtype, device))
    except OSError as e:
        raise EvolveError(f"cannot load model {source} (offline, or not a model): {_first_line(e)}") from None
    model.to(device)  # before peft wraps it, so the adapter weights are created on the same device
    if spec.finetune == "lora":
        from peft import LoraConfig, PeftModel, get_peft_model

        with warnings.catch_warnings():
            # peft 0.21 reads transformers 5's deprecated `is_gradient_checkpointing`: their warning, printed
            # into every run's output, says nothing a user can act on.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            if adapter_dir:
                model = PeftModel.from_pretrained(model, adapter_dir, is_trainable=True, torch_device=device)
            else:
                cfg = LoraConfig(
                    r=spec.lora.r, lora_alpha=spec.lora.alpha, lora_dropout=spec.lora.dropout,
                    target_modules=list(spec.lora.target_modules), task_type="CAUSAL_LM",
                )
                model = get_peft_model(model, cfg)
    contiguous_head_input(model)  # a frozen head must not be copied once per row (see head_input.py)
    return model


def load_reference(spec: PolicySpec, base_path: str, device: str = "cpu", dtype: str | None = None):
    """Frozen reference for the KL term with full fine-tuning: the base weights (not a checkpoint)."""
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch_dtype(dtype or spec.dtype, device))
    ref.to(device)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    contiguous_head_input(ref)  # frozen: without it, each forward would copy the head per row
    return ref


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
