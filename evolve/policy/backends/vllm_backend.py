"""In-process vLLM generation (the `gpu` extra), following TRL 1.16's colocate mode.

Read from TRL 1.16 (`trl/generation/vllm_generation.py`, colocate branch) and vLLM 0.31 (`LLM.apply_model`):
- the engine runs in this process: ``distributed_executor_backend="external_launcher"`` with RANK,
  LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set for a world of one (TRL sets them from accelerate).
  Without it vLLM V1 keeps the model in an engine-core process, where no tensor of ours can reach it;
- ``logprobs_mode="processed_logprobs"``: the returned log-probs are those of the distribution
  actually sampled (after temperature), as the HF backend's are, not the raw model log-probs;
- weights go in through ``LLM.apply_model(fn)`` (vLLM's public hook: fn(model) in each worker), calling
  the model's own ``load_weights`` on (HF name, tensor) pairs taken from the CUDA training model, LoRA
  merged in (as TRL: merge, strip peft prefixes, unmerge); then ``reset_prefix_cache``;
- weights are pushed at construction too, so a resumed or forked run (full or LoRA) samples from its
  checkpoint from the first rollout, not from the base weights the engine loaded from disk.

NEVER RUN on the machines this project was built on (no GPU lent): `scripts/gpu_check.sh` is the check.
"""

from __future__ import annotations

import os
import socket

from evolve.errors import EvolveError
from evolve.policy.backends.weights import merged_named_params
from evolve.policy.chat import encode_prompt, eos_ids
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec


def sample_from_ids(tokenizer, text: str, prompt_ids, comp_ids, logprobs, finish_reason: str, eos) -> Sample:
    truncated = finish_reason == "length" and not (comp_ids and comp_ids[-1] in eos)
    return Sample(text=tokenizer.decode(comp_ids, skip_special_tokens=True), prompt_text=text,
                  prompt_ids=list(prompt_ids), completion_ids=list(comp_ids), logprobs=list(logprobs),
                  truncated=truncated, finish_reason=finish_reason)


def single_process_dist_env() -> None:
    """What torchrun would set, for a world of one (TRL: accelerate's values + ensure_master_addr_port)."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])


def engine_dtype(spec: PolicySpec, model) -> str:
    """vLLM samples in the training model's dtype (bf16 on CUDA with dtype 'auto')."""
    if model is not None:
        return str(next(model.parameters()).dtype).removeprefix("torch.")
    return "bfloat16" if spec.dtype in ("auto", "auto-bf16") else spec.dtype


class VllmBackend:
    name = "vllm"
    exposes_tokens = True

    def __init__(self, model_path: str, tokenizer, spec: PolicySpec, model=None):
        try:
            from vllm import LLM
        except ImportError:
            from evolve.policy.backends.base import VLLM_MISSING

            raise EvolveError(VLLM_MISSING) from None
        if model is not None and next(model.parameters()).device.type != "cuda":
            raise EvolveError("the vllm backend needs the policy on CUDA (device = 'auto' or 'cuda')")
        self.tokenizer = tokenizer
        self.spec = spec
        self.eos = set(eos_ids(tokenizer, model))
        single_process_dist_env()
        self.llm = LLM(model=model_path, dtype=engine_dtype(spec, model),
                       gpu_memory_utilization=spec.vllm.gpu_memory_utilization, seed=spec.seed,
                       enable_prefix_caching=True, distributed_executor_backend="external_launcher",
                       logprobs_mode="processed_logprobs", max_num_batched_tokens=4096,
                       max_model_len=spec.vllm.max_model_len)
        if model is not None:
            self.sync_weights(model)  # after load and after resume (a LoRA adapter included)

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        from vllm import SamplingParams

        s = self.spec.sampling
        encoded = [encode_prompt(self.tokenizer, m) for m in prompts]
        params = SamplingParams(n=n, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_new_tokens,
                                logprobs=0, seed=seed)
        outs = self.llm.generate([{"prompt_token_ids": ids} for _, ids in encoded], params, use_tqdm=False)
        result = []
        for (text, ids), out in zip(encoded, outs, strict=True):
            group = []
            for c in out.outputs:
                lps = [lp[t].logprob for lp, t in zip(c.logprobs or [], c.token_ids, strict=False)]
                group.append(sample_from_ids(self.tokenizer, text, ids, list(c.token_ids), lps,
                                             c.finish_reason or "", self.eos))
            result.append(group)
        return result

    def sync_weights(self, model) -> None:
        with merged_named_params(model) as params:
            pairs = [(name, t.detach()) for name, t in params]

            def load(engine_model):  # runs inside vLLM's worker: here, this process (external_launcher)
                engine_model.load_weights(pairs)

            self.llm.apply_model(load)
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        self.llm = None
