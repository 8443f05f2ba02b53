"""A model behind an API or an OpenAI-compatible server, through litellm.

Its weights cannot change: samples carry text only (no token ids or log-probs), and the policy's
``can_update`` is False, so only prompt evolution applies. litellm is imported on first use (8.5 s).
"""

from __future__ import annotations

import os

from evolve.errors import EvolveError
from evolve.policy.sample import Sample
from evolve.policy.spec import LitellmSpec, SamplingSpec


def render_plain(messages: list[dict]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


class LitellmBackend:
    name = "litellm"
    exposes_tokens = False

    def __init__(self, cfg: LitellmSpec, sampling: SamplingSpec):
        self.cfg = cfg
        self.sampling = sampling

    def _call(self, messages: list[dict], n: int, seed: int):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        kwargs = {}
        if self.cfg.api_key_env:
            kwargs["api_key"] = os.environ.get(self.cfg.api_key_env, "")
        elif self.cfg.api_base:
            kwargs["api_key"] = "none"  # local OpenAI-compatible servers ignore it; the client requires one
        try:
            return litellm.completion(
                model=self.cfg.model, messages=messages, n=n, temperature=self.sampling.temperature,
                top_p=self.sampling.top_p, max_tokens=self.sampling.max_new_tokens, seed=seed,
                api_base=self.cfg.api_base, timeout=self.cfg.timeout, num_retries=self.cfg.num_retries, **kwargs,
            )
        except Exception as e:  # an unreachable server or a bad key is the user's to fix
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise EvolveError(f"litellm backend {self.cfg.model}: {first}") from None

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        out = []
        for messages in prompts:
            samples: list[Sample] = []
            attempt = 0
            while len(samples) < n:  # some servers ignore n and return one choice
                resp = self._call(messages, n - len(samples), seed + attempt)
                attempt += 1
                for choice in resp.choices[: n - len(samples)]:
                    finish = choice.finish_reason or ""
                    samples.append(Sample(text=choice.message.content or "", prompt_text=render_plain(messages),
                                          truncated=finish == "length", finish_reason=finish))
                if attempt > 4 * n:
                    raise EvolveError(f"litellm backend {self.cfg.model}: server returned no choices")
            out.append(samples)
        return out

    def sync_weights(self, model) -> None:  # nothing to sync: weights are frozen behind the API
        pass

    def close(self) -> None:
        pass
