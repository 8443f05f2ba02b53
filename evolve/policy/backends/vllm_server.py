"""Generation through a `trl vllm-serve` server with TRL's VLLMClient; weights pushed after each update.

Start the server on the GPU machine (``trl vllm-serve --model MODEL``); the trainer process calls
``init_communicator`` once, then ``update_named_param`` per tensor and ``reset_prefix_cache`` per sync.
Not exercised on the CPU machines this project is tested on.
"""

from __future__ import annotations

from evolve.errors import EvolveError
from evolve.policy.backends.vllm_backend import sample_from_ids
from evolve.policy.backends.weights import merged_named_params
from evolve.policy.chat import encode_prompt
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec


class VllmServerBackend:
    name = "vllm-server"
    exposes_tokens = True

    def __init__(self, tokenizer, spec: PolicySpec, model=None):
        try:
            from trl.generation.vllm_client import VLLMClient
        except ImportError:
            from evolve.policy.policy import VLLM_MISSING

            raise EvolveError(VLLM_MISSING) from None
        v = spec.vllm
        self.tokenizer = tokenizer
        self.spec = spec
        self.eos = {tokenizer.eos_token_id}
        try:
            self.client = VLLMClient(host=v.host, server_port=v.port, group_port=v.group_port,
                                     connection_timeout=v.connection_timeout)
            self.client.init_communicator()
        except Exception as e:  # connection refused, timeout: an environment problem the user can fix
            raise EvolveError(f"cannot reach trl vllm-serve at {v.host}:{v.port}: {e}") from None

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
            for name, tensor in params:
                self.client.update_named_param(name, tensor)
        self.client.reset_prefix_cache()

    def close(self) -> None:
        try:
            self.client.close_communicator()
        except Exception:  # best effort at shutdown
            pass
