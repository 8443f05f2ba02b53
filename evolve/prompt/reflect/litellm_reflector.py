"""Reflection with any LM through litellm (a hosted model, or a local OpenAI-compatible server such as
``evolve serve --policy policies/qwen2.5-coder-1.5b-instruct.toml``).

One request per reflection step: the current instruction and failing traces from several tasks in,
several sampled drafts of ONE general rule out (the prompt, the filter, and where they depart from
gepa's own template: evolve/prompt/reflect/lm_rule.py). Transient errors and timeouts are retried
(evolve/util/retry.py, the one retry policy), then recorded and returned as a failed draft: the run goes on. Empty, truncated
(finish_reason "length"), rambling or task-restating drafts are refused and recorded, never accepted
as a prompt.
"""

from __future__ import annotations

import os
import random
import time

from evolve.prompt.candidate import Candidate, system_text
from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.lessons import join_lessons, split_lessons
from evolve.prompt.recorder import LMRecorder, NullRecorder, recorded_call
from evolve.prompt.reflect.base import Draft
from evolve.prompt.reflect.lm_rule import (
    RULE_MAX_TOKENS,
    filter_rule,
    fit_pooled_prompt,
    pick_records,
    render_rule_prompt,
)
from evolve.prompt.reflective_dataset import ReflectiveDataset
from evolve.util.retry import with_retries


class LiteLLMReflector:
    """Reflection LM via ``litellm.completion`` (imported lazily: it costs seconds).

    One request per reflection step samples ``reflection_drafts`` drafts of ONE general rule
    (evolve/prompt/reflect/lm_rule.py); the drafts that pass the filter, deduplicated, become up to ``n``
    proposals, each the parent with the rule added to its ``lessons`` (the oldest line dropped when
    ``max_lessons`` are already there). ``lessons`` not among the components: the rule goes to ``system``.
    """

    def __init__(self, config: PromptEvolutionConfig, recorder: LMRecorder | None = None, sleep=time.sleep) -> None:
        self.config = config
        self.recorder = recorder or NullRecorder()
        self.name = config.reflection_lm
        self._sleep = sleep

    def reflect(self, parent: Candidate, dataset: ReflectiveDataset, rng: random.Random, n: int,
                avoid: frozenset[str] = frozenset(), rejected: dict[str, int] | None = None) -> list[Draft]:
        c = self.config
        target = "lessons" if "lessons" in c.components else "system"
        existing = split_lessons(parent.components.get(target, ""))
        records = pick_records(dataset.records)
        if dataset.classes is None:  # the generation view (runs recorded before the pooled one)
            content = render_rule_prompt(system_text(parent.components), records, dataset.groups,
                                         dataset.n_failures, dataset.n_rollouts)
        else:
            content, records = fit_pooled_prompt(system_text(parent.components), records, dataset.classes,
                                                 dataset.n_failures, dataset.n_rollouts,
                                                 len(dataset.generations or []), c.reflection_prompt_chars)
        request = {"model": c.reflection_lm, "api_base": c.api_base, "temperature": c.temperature,
                   "max_tokens": min(c.max_tokens, RULE_MAX_TOKENS), "n": max(n, c.reflection_drafts),
                   "seed": rng.getrandbits(31), "messages": [{"role": "user", "content": content}]}
        out = recorded_call(self.recorder, "reflection", c.reflection_lm, request, lambda: self._call(request))
        ids = [out.call_id] if out.call_id is not None else []
        if out.error is not None or out.response is None:
            return [Draft(None, "reflection", "", ids, out.error or "no response", out.cost_usd)]
        drafts, seen, whys = [], set(), []
        for choice in out.response["choices"]:
            rule, why = filter_rule(choice["content"], choice["finish_reason"], records, existing)
            if rule is None or rule in seen:
                whys.append(why or "rejected: a duplicate draft")
                continue
            seen.add(rule)
            new = Candidate(parent.with_component(target, join_lessons(
                ([*existing, rule])[-c.max_lessons:] if target == "lessons" else [*existing, rule])).components)
            if new.id[:16] in avoid:
                whys.append("rejected: already in the pool")
                continue
            drafts.append(Draft(new.components, "add-lesson", f"{self.name} wrote the rule {rule!r} from "
                                f"{len(records)} examples", ids, None, out.cost_usd))
        drafts = drafts[:n]
        if not drafts:  # every draft refused: one failed proposal carries the reasons (all recorded)
            return [Draft(None, "reflection", "", ids, "; ".join(sorted(set(whys))) or "no draft", out.cost_usd)]
        return drafts

    def _call(self, request: dict) -> tuple[dict | None, str | None, dict, float]:
        """One LM call with retries; never raises for an LM failure."""
        import litellm  # lazy: ~8.5 s import

        # Each failed attempt would print litellm's help banner into the run's output; the error itself is
        # recorded with the call.
        litellm.suppress_debug_info = True

        c = self.config
        kwargs = {"model": request["model"], "messages": request["messages"], "temperature": c.temperature,
                  "max_tokens": request["max_tokens"], "n": request["n"], "seed": request["seed"],
                  "timeout": c.timeout_s, "num_retries": 0}
        if c.api_base:
            kwargs["api_base"] = c.api_base
            kwargs["api_key"] = os.environ.get(c.api_key_env or "", "") or "sk-local"
        elif c.api_key_env:
            kwargs["api_key"] = os.environ.get(c.api_key_env, "")
        try:
            resp = with_retries(lambda: litellm.completion(**kwargs), c.retries, c.backoff_s, self._sleep)
        except Exception as e:  # noqa: BLE001 - any provider error, after the retries, is recorded
            return None, f"{type(e).__name__}: {' '.join(str(e).split())[:300]}", {}, 0.0
        return self._parse(resp)

    @staticmethod
    def _parse(resp) -> tuple[dict, None, dict, float]:
        usage = getattr(resp, "usage", None)
        tokens = {"prompt": getattr(usage, "prompt_tokens", 0) or 0,
                  "completion": getattr(usage, "completion_tokens", 0) or 0}
        cost = float((getattr(resp, "_hidden_params", None) or {}).get("response_cost") or 0.0)
        choices = [{"content": ch.message.content, "finish_reason": ch.finish_reason} for ch in resp.choices]
        return {"choices": choices}, None, tokens, cost
