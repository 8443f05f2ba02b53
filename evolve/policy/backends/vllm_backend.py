"""In-process vLLM generation (the `gpu` extra), with the trained weights pushed in after each update.

Weight sync follows TRL's colocate mode: ``load_weights`` on the engine's model for every
(merged) parameter, then ``reset_prefix_cache``. Log-probs are vLLM's sampled-token log-probs
(``logprobs=0``), i.e. the sampler's own distribution; the update recomputes old log-probs in the
training precision when num_iterations > 1 and reports the gap (see updater.py).
Not exercised on the CPU machines this project is tested on: it needs a GPU and vllm installed.
"""

from __future__ import annotations

from evolve.errors import EvolveError
from evolve.policy.backends.weights import merged_named_params
from evolve.policy.chat import encode_prompt
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec


def sample_from_ids(tokenizer, text: str, prompt_ids, comp_ids, logprobs, finish_reason: str, eos) -> Sample:
    truncated = finish_reason == "length" and not (comp_ids and comp_ids[-1] in eos)
    return Sample(text=tokenizer.decode(comp_ids, skip_special_tokens=True), prompt_text=text,
                  prompt_ids=list(prompt_ids), completion_ids=list(comp_ids), logprobs=list(logprobs),
                  truncated=truncated, finish_reason=finish_reason)


class VllmBackend:
    name = "vllm"
    exposes_tokens = True

    def __init__(self, model_path: str, tokenizer, spec: PolicySpec, model=None):
        try:
            from vllm import LLM
        except ImportError:
            from evolve.policy.policy import VLLM_MISSING

            raise EvolveError(VLLM_MISSING) from None
        self.tokenizer = tokenizer
        self.spec = spec
        self.eos = {tokenizer.eos_token_id}
        self.llm = LLM(model=model_path, dtype=spec.dtype, gpu_memory_utilization=spec.vllm.gpu_memory_utilization,
                       seed=spec.seed, enable_prefix_caching=True)
        if model is not None and spec.finetune == "full" and model_path != getattr(model, "name_or_path", model_path):
            self.sync_weights(model)

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
        engine_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        with merged_named_params(model) as params:
            for name, tensor in params:
                engine_model.load_weights([(name, tensor)])
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        self.llm = None
