"""A model behind an API or an OpenAI-compatible server, through litellm.

Its weights cannot change: samples carry text only (no token ids or log-probs), and the policy's
``can_update`` is False, so only prompt evolution applies. litellm is imported on first use (8.5 s).

Every request can be recorded: the loop sets ``call_hook`` (the policy never imports the prompt
package's recorder; they meet in the loop), which records each request and its reply or error and,
on replay, serves them from the lineage instead of calling the server.
"""

from __future__ import annotations

import os

from evolve.errors import EvolveError
from evolve.policy.sample import Sample
from evolve.policy.spec import LitellmSpec, SamplingSpec
from evolve.util.retry import with_retries

BACKOFF_S = 1.0  # first wait before a retry (doubled each time): the reflector's default


def render_plain(messages: list[dict]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


class LitellmBackend:
    name = "litellm"
    exposes_tokens = False

    def __init__(self, cfg: LitellmSpec, sampling: SamplingSpec):
        if sampling.stop:  # an API's stop strings are dropped from the reply: a closing tag would be lost
            raise EvolveError("sampling.stop is for the hf, vllm and vllm-server backends; an API drops the "
                              "stop string from its reply")
        self.cfg = cfg
        self.sampling = sampling
        # call_hook(role, model, request, fetch) -> (response, error): set by the loop to record calls
        # (and to serve recorded ones on replay); ``fetch()`` returns (response, error, tokens, cost).
        self.call_hook = None

    def _request(self, messages: list[dict], n: int, seed: int) -> dict:
        """What identifies a call (its record's key): no server address or key, so a replay needs neither."""
        return {"model": self.cfg.model, "messages": messages, "n": n, "temperature": self.sampling.temperature,
                "top_p": self.sampling.top_p, "max_tokens": self.sampling.max_new_tokens, "seed": seed}

    def _fetch(self, messages: list[dict], n: int, seed: int):
        try:
            resp = self._call(messages, n, seed)
        except EvolveError as e:
            return None, str(e), {}, 0.0
        usage = getattr(resp, "usage", None)
        tokens = {k: getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens")} if usage else {}
        choices = [{"content": c.message.content or "", "finish_reason": c.finish_reason or ""} for c in resp.choices]
        return {"choices": choices}, None, tokens, 0.0

    def _complete(self, messages: list[dict], n: int, seed: int) -> list[dict]:
        if self.call_hook is None:
            response, error, _, _ = self._fetch(messages, n, seed)
        else:
            response, error = self.call_hook("policy", self.cfg.model, self._request(messages, n, seed),
                                             lambda: self._fetch(messages, n, seed))
        if error is not None or response is None:
            raise EvolveError(error or f"litellm backend {self.cfg.model}: no response")
        return response["choices"]

    def _call(self, messages: list[dict], n: int, seed: int):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        kwargs = {}
        if self.cfg.api_key_env:
            kwargs["api_key"] = os.environ.get(self.cfg.api_key_env, "")
        elif self.cfg.api_base:
            kwargs["api_key"] = "none"  # local OpenAI-compatible servers ignore it; the client requires one
        def once():
            return litellm.completion(
                model=self.cfg.model, messages=messages, n=n, temperature=self.sampling.temperature,
                top_p=self.sampling.top_p, max_tokens=self.sampling.max_new_tokens, seed=seed,
                api_base=self.cfg.api_base, timeout=self.cfg.timeout, num_retries=0, **kwargs,
            )

        try:
            return with_retries(once, self.cfg.num_retries, BACKOFF_S)
        except Exception as e:  # an unreachable server or a bad key is the user's to fix
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise EvolveError(f"litellm backend {self.cfg.model}: {first}") from None

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        out = []
        for messages in prompts:
            samples: list[Sample] = []
            attempt = 0
            while len(samples) < n:  # some servers ignore n and return one choice
                choices = self._complete(messages, n - len(samples), seed + attempt)
                attempt += 1
                for choice in choices[: n - len(samples)]:
                    finish = choice["finish_reason"]
                    samples.append(Sample(text=choice["content"], prompt_text=render_plain(messages),
                                          truncated=finish == "length", finish_reason=finish))
                if attempt > 4 * n:
                    raise EvolveError(f"litellm backend {self.cfg.model}: server returned no choices")
            out.append(samples)
        return out

    def sync_weights(self, model) -> None:  # nothing to sync: weights are frozen behind the API
        pass

    def begin_generation(self) -> None:  # whatever the API caches is not ours to drop
        pass

    def close(self) -> None:
        pass
