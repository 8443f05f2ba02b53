"""The Policy: generation through a backend, GRPO-family updates, checkpoints, a stable weights hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evolve.errors import EvolveError
from evolve.policy.backends.base import VLLM_MISSING, require_vllm
from evolve.policy.backends.registry import BACKENDS, NEEDS_VLLM, WEIGHTLESS
from evolve.policy.backends.vllm_nucleus import VLLM_SORT
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec
from evolve.policy.stats import UpdateStats
from evolve.rollout import Rollout
from evolve.util.atomic import atomic_write_bytes, atomic_write_text

TRAINER_STATE = "trainer_state.pt"
SAMPLER_STATE = "sampler.json"
POLICY_META = "policy.json"
FROZEN_MESSAGE = "weights frozen: the litellm backend cannot be trained; prompt evolution only"


class Policy:
    def __init__(self, spec: PolicySpec, backend, model=None, tokenizer=None, updater=None,
                 base_path: str | None = None):
        self.spec = spec
        self.backend = backend
        self.model = model
        self.tokenizer = tokenizer
        self.updater = updater
        self.base_path = base_path
        self.generate_calls = 0  # sampler state: how many generate() calls this policy has served
        self.resolved: dict = {}  # what the spec resolved to here (dtype, threads, device), recorded in policy.json

    @property
    def can_update(self) -> bool:
        return self.updater is not None

    def generate(self, prompts: list[list[dict]], n: int, seed: int = 0) -> list[list[Sample]]:
        """``n`` samples per prompt (the loop's G is its ``samples_per_task``)."""
        self.generate_calls += 1
        return self.backend.generate(prompts, n, seed)

    def begin_generation(self) -> None:
        """Called by the loop at the start of every generation: the backend drops its caches (base.py)."""
        self.backend.begin_generation()

    def update(self, groups: list[list[Rollout]]) -> UpdateStats:
        if self.updater is None:
            raise EvolveError(FROZEN_MESSAGE)
        stats = self.updater.update(groups)
        if stats.n_trained_groups:
            self.backend.sync_weights(self.model)
        return stats

    # -- identity -------------------------------------------------------------------------------
    def weights_hash(self) -> str:
        """sha256 over (name, dtype, shape, raw bytes) of every parameter, in name order."""
        import torch

        if self.model is None:
            return hashlib.sha256(f"api:{self.spec.litellm.model}".encode()).hexdigest()
        h = hashlib.sha256()
        for name, p in sorted(self.model.named_parameters(), key=lambda kv: kv[0]):
            t = p.detach().cpu().contiguous().reshape(-1)
            h.update(f"{name}|{t.dtype}|{tuple(p.shape)}\n".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
        return h.hexdigest()

    # -- checkpoints ----------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """HF weights (or the PEFT adapter) + tokenizer + optimizer/scheduler + sampler state.

        No global RNG state: generation reseeds from its ``seed`` argument (see ``evolve.util.repro``).

        Write into a fresh folder; the loop then puts the folder into the artifact store. Every
        file here is written atomically, and ``policy.json`` last, so a folder holding it is complete.
        """
        import torch

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if self.model is not None:  # an API model (litellm) has no weights: only the sampler state
            self.model.save_pretrained(str(d), safe_serialization=True)
            self.tokenizer.save_pretrained(str(d))
        if self.updater is not None:
            import io

            buf = io.BytesIO()
            torch.save(self.updater.state_dict(), buf)
            atomic_write_bytes(d / TRAINER_STATE, buf.getvalue())
        atomic_write_text(d / SAMPLER_STATE, json.dumps({"generate_calls": self.generate_calls}))
        meta = {"spec": self.spec.model_dump(mode="json"), "finetune": self.spec.finetune,
                "base_model": self.spec.model, "weights_hash": self.weights_hash(),
                "step": self.updater.step if self.updater else 0}
        if self.resolved:
            meta["resolved"] = self.resolved
        atomic_write_text(d / POLICY_META, json.dumps(meta, indent=1, sort_keys=True))
        return d

    def close(self) -> None:
        self.backend.close()


def load_policy(spec: PolicySpec, checkpoint_dir: str | Path | None = None) -> Policy:
    """Build the policy a spec describes; with ``checkpoint_dir``, restore weights and all training state."""
    if spec.backend in WEIGHTLESS:
        policy = Policy(spec, BACKENDS[spec.backend](spec, None, None, None))
        if checkpoint_dir is not None:
            _restore_sampler(policy, Path(checkpoint_dir))
        return policy
    import torch

    from evolve.policy.backends.hf import BATCH, HFBackend
    from evolve.policy.backends.vllm_backend import VllmBackend
    from evolve.policy.model_io import (
        load_model,
        load_reference,
        load_tokenizer,
        resolve_device,
        resolve_dtype_name,
        resolve_model_path,
        warn_if_emulated_bf16,
    )
    from evolve.policy.nucleus import TRANSFORMERS
    from evolve.policy.prompt_sharing import PER_ROW
    from evolve.policy.updater import Updater

    torch.set_num_threads(spec.threads)
    if spec.backend in NEEDS_VLLM:
        require_vllm()
    base = resolve_model_path(spec)
    device = resolve_device(spec.device)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if ckpt is not None and not (ckpt / POLICY_META).exists():
        raise EvolveError(f"{ckpt} is not a complete policy checkpoint (no {POLICY_META})")
    # A checkpoint keeps the dtype its run resolved ("auto-bf16" on a bf16 CPU), so a resume on
    # another machine continues as the run went straight through.
    recorded = _recorded(ckpt)
    dtype = recorded.get("dtype") or resolve_dtype_name(spec.dtype, device)
    warn_if_emulated_bf16(dtype, device)
    tokenizer = load_tokenizer(str(ckpt) if ckpt else base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)  # LoRA adapter init is random: make it a function of the spec
        if ckpt is None:
            model = load_model(spec, base, device=device, dtype=dtype)
        elif spec.finetune == "lora":
            model = load_model(spec, base, adapter_dir=str(ckpt), device=device, dtype=dtype)
        else:
            model = load_model(spec, base, full_dir=str(ckpt), device=device, dtype=dtype)
    reference = (load_reference(spec, base, device, dtype=dtype)
                 if spec.grpo.beta and spec.finetune == "full" else None)
    updater = Updater(model, spec, tokenizer.pad_token_id, reference)
    if ckpt is not None:  # a checkpoint keeps its run's update forward; one recording none: every row's own
        updater.forward = recorded.get("update_forward", PER_ROW)
        if (ckpt / TRAINER_STATE).exists():
            updater.load_state_dict(torch.load(ckpt / TRAINER_STATE, weights_only=False))
    backend = BACKENDS[spec.backend](spec, model, tokenizer, base)
    policy = Policy(spec, backend, model, tokenizer, updater, base)
    drawn: dict = {}
    if isinstance(backend, HFBackend):  # its token draw (evolve.policy.nucleus) and prompt forward (hf.py)
        if ckpt is not None:  # a checkpoint keeps its run's; one recording none: transformers' draw, batch prefill
            backend.sampler = recorded.get("sampler", TRANSFORMERS)
            backend.prefill = recorded.get("prefill", BATCH)
        drawn = {"sampler": backend.sampler, "prefill": backend.prefill}
    elif isinstance(backend, VllmBackend):  # its top-p filter (backends/vllm_nucleus.py)
        if ckpt is not None:  # a checkpoint recording none was drawn with vLLM's own sort
            backend.nucleus = recorded.get("nucleus", VLLM_SORT)
        drawn = {"nucleus": backend.nucleus}
    policy.resolved = {"dtype": dtype, "threads": torch.get_num_threads(), "device": device,
                       "model_sha256": spec.model_sha256, "update_forward": updater.forward, **drawn}
    if ckpt is not None:
        _restore_sampler(policy, ckpt)
    return policy


def _recorded(ckpt: Path | None) -> dict:
    """What a checkpoint recorded as resolved (dtype, threads, ...); {} for none or an older checkpoint."""
    if ckpt is None:
        return {}
    return dict(json.loads((ckpt / POLICY_META).read_text()).get("resolved") or {})


def _restore_sampler(policy: Policy, ckpt: Path) -> None:
    if (ckpt / SAMPLER_STATE).exists():
        policy.generate_calls = int(json.loads((ckpt / SAMPLER_STATE).read_text())["generate_calls"])


__all__ = ["BACKENDS", "FROZEN_MESSAGE", "POLICY_META", "VLLM_MISSING", "Policy", "load_policy"]
