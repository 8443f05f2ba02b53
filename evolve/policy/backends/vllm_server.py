"""Generation through a vLLM server with TRL 1.16's VLLMClient; weights pushed over NCCL from the CUDA device.

Start the server on the GPU machine as TRL 1.16 documents it (its client talks to plain `vllm serve`):

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL_DIR --weight-transfer-config '{"backend": "nccl"}' \
        --logprobs-mode processed_logprobs --max-logprobs -1

The trainer joins the server's NCCL group once (``init_communicator(device=<the policy's CUDA device>)``:
NCCL moves CUDA tensors only, so a CPU policy is refused here rather than failing in the broadcast).
Each sync streams every (LoRA-merged) parameter inside one ``weight_update()`` and resets the prefix
cache; the first sync happens at construction, so a resumed run samples from its checkpoint.
NEVER RUN on the machines this project was built on (no GPU lent).
"""

from __future__ import annotations

import sys

from evolve.errors import EvolveError
from evolve.policy.backends.vllm_backend import sample_from_ids
from evolve.policy.backends.weights import merged_named_params
from evolve.policy.chat import encode_prompt, eos_ids
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec


class VllmServerBackend:
    name = "vllm-server"
    exposes_tokens = True

    def __init__(self, tokenizer, spec: PolicySpec, model=None):
        try:
            from trl.generation.vllm_client import VLLMClient
        except ImportError:
            from evolve.policy.backends.base import VLLM_MISSING

            raise EvolveError(VLLM_MISSING) from None
        v = spec.vllm
        self.tokenizer = tokenizer
        self.spec = spec
        self.eos = set(eos_ids(tokenizer, model))
        device = next(model.parameters()).device if model is not None else None
        if device is not None and device.type != "cuda":
            raise EvolveError("vllm-server weight sync runs over NCCL and needs the policy on CUDA "
                              "(device = 'auto' or 'cuda')")
        try:
            self.client = VLLMClient(host=v.host, server_port=v.port, group_port=v.group_port,
                                     connection_timeout=v.connection_timeout)
            self._check_logprobs_mode()
            if device is not None:
                self.client.init_communicator(device=device)
        except EvolveError:
            raise
        except Exception as e:  # connection refused, timeout, no weight-transfer engine: the user's to fix
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise EvolveError(f"vLLM server at {v.host}:{v.port}: {first}") from None
        if model is not None:
            self.sync_weights(model)  # after load and after resume

    def _check_logprobs_mode(self) -> None:
        mode = self.client.get_server_info().get("model_config", {}).get("logprobs_mode")
        if mode != "processed_logprobs":  # as TRL 1.16 warns: raw log-probs bias the importance ratio
            print(f"warning: the vLLM server runs with logprobs_mode={mode!r}; start it with "
                  "--logprobs-mode processed_logprobs (behaviour log-probs are then those sampled)", file=sys.stderr)

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        s = self.spec.sampling
        encoded = [encode_prompt(self.tokenizer, m) for m in prompts]
        out = self.client.generate([ids for _, ids in encoded], n=n, temperature=s.temperature, top_p=s.top_p,
                                   max_tokens=s.max_new_tokens, logprobs=0, generation_kwargs={"seed": seed})
        result = []
        for p, (text, ids) in enumerate(encoded):
            group = []
            for j in range(n):
                k = p * n + j
                comp = out["completion_ids"][k]
                lps = [row[0] if isinstance(row, list) else row for row in out["logprobs"][k]]
                finish = "stop" if comp and comp[-1] in self.eos else "length"
                group.append(sample_from_ids(self.tokenizer, text, ids, comp, lps, finish, self.eos))
            result.append(group)
        return result

    def sync_weights(self, model) -> None:
        with merged_named_params(model) as params:
            metadata = [(name, str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in params]
            with self.client.weight_update():
                self.client.update_named_params(metadata, iter(params))
        self.client.reset_prefix_cache()

    def close(self) -> None:
        try:
            self.client.close_communicator()
        except Exception:  # best effort at shutdown
            pass
