"""Reflection with any LM through litellm (a hosted model, or a local OpenAI-compatible server).

One request per draft: the current text of one component, the reflective dataset, and
the ask to reply with JSON ``{"new_instruction": ...}`` (the reply shape dspy.GEPA uses).
Errors and timeouts are retried with exponential backoff, then recorded and returned as
a failed draft: the run goes on. Empty, truncated (finish_reason "length") or malformed
replies are rejected and recorded, never accepted as a prompt.
"""

from __future__ import annotations

import json
import os
import random
import re
import time

from evolve.prompt.candidate import Candidate
from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.recorder import LMRecorder, NullRecorder, recorded_call
from evolve.prompt.reflect.base import Draft
from evolve.prompt.reflective_dataset import ReflectiveDataset

PROMPT = """I gave a code-writing assistant the following text as the "{component}" part of its instructions:
```
{current}
```
Here are tasks it was given under these instructions, what it wrote, and the verifier's feedback.
Failures come first, grouped by failure signature, with a few successes for contrast:
{examples}

Failure signatures over all {n_failures} failures in {n_rollouts} attempts:
{groups}

Write an improved "{component}" text that fixes the failures without breaking the successes.
Keep it short and general: state rules, not answers to these particular tasks.{shape}
Reply with only a JSON object: {{"new_instruction": "<the new text>"}}"""

_WS = re.compile(r"\s*")
_LANGS = ("json", "text", "markdown")


def fenced_body(text: str) -> str | None:
    """The body of the first fenced block, as ``re.search(r"```(?:json|text|markdown)?\\s*\\n?(.*?)```",
    text, re.S).group(1)`` would give it (None where that finds no match), in linear time: that regex
    backtracks quadratically over a reply with an opening fence, a long run of whitespace and no
    closing fence (44 s for 40,000 characters here). The match, when there is one, always starts at
    the first fence, so one scan finds it: the body starts after the language word and the
    whitespace, and runs to the next fence."""
    i = text.find("```")
    if i < 0:
        return None
    start = i + 3
    for lang in _LANGS:
        if text.startswith(lang, start):
            start += len(lang)
            break
    start = _WS.match(text, start).end()
    end = text.find("```", start)
    return text[start:end] if end >= 0 else None


def _episode(record: dict) -> str:
    """A multi-turn record's whole episode (the repair turns); nothing for single-turn records."""
    if "transcript" not in record:
        return ""
    return f"\nEpisode ({record['turns']} policy turns, the environment's answers between them):\n{record['transcript']}"


def build_messages(component: str, current: str, dataset: ReflectiveDataset) -> list[dict]:
    examples = "\n".join(
        f"### Example {i + 1} ({'passed' if r['passed'] else 'failed'})\nTask:\n{r['inputs']}\n"
        f"Output:\n{r['output']}\nFeedback: {r['feedback']}" + _episode(r) for i, r in enumerate(dataset.records))
    groups = "\n".join(f"- {g['signature']}: {g['count']}" for g in dataset.groups) or "- none"
    shape = " One short rule per line." if component == "lessons" else ""
    text = PROMPT.format(component=component, current=current or "(empty)", examples=examples or "(none)", shape=shape,
                         groups=groups, n_failures=dataset.n_failures, n_rollouts=dataset.n_rollouts)
    return [{"role": "user", "content": text}]


def parse_reply(content: str | None, finish_reason: str | None, max_chars: int) -> tuple[str | None, str | None]:
    """(new text, None) or (None, why it was rejected)."""
    if finish_reason == "length":
        return None, "rejected: truncated reply (finish_reason=length)"
    text = (content or "").strip()
    if not text:
        return None, "rejected: empty reply"
    if text.count("```") % 2:
        return None, "rejected: unbalanced code fence"
    fenced = fenced_body(text)
    body = fenced.strip() if fenced is not None else text
    if body.startswith("{"):
        try:
            obj = json.loads(body)
        except json.JSONDecodeError:
            return None, "rejected: reply is not valid JSON"
        new = obj.get("new_instruction") if isinstance(obj, dict) else None
        if not isinstance(new, str):
            return None, "rejected: JSON reply has no string 'new_instruction'"
        body = new.strip()
    if not body:
        return None, "rejected: empty instruction"
    if len(body) > max_chars:
        return None, f"rejected: instruction longer than {max_chars} characters"
    return body, None


class LiteLLMReflector:
    """Reflection LM via ``litellm.completion`` (imported lazily: it costs seconds)."""

    def __init__(self, config: PromptEvolutionConfig, recorder: LMRecorder | None = None, sleep=time.sleep) -> None:
        self.config = config
        self.recorder = recorder or NullRecorder()
        self.name = config.reflection_lm
        self._sleep = sleep

    def reflect(self, parent: Candidate, dataset: ReflectiveDataset, rng: random.Random, n: int,
                avoid: frozenset[str] = frozenset(), rejected: dict[str, int] | None = None) -> list[Draft]:
        comps = [c for c in self.config.components if c != "demos"] or ["system"]
        out = []
        for k in range(n):
            component = comps[(rng.randrange(len(comps)) + k) % len(comps)]
            out.append(self._one(parent, component, dataset, k))
        return out

    def _one(self, parent: Candidate, component: str, dataset: ReflectiveDataset, k: int) -> Draft:
        c = self.config
        request = {"model": c.reflection_lm, "api_base": c.api_base, "temperature": c.temperature,
                   "max_tokens": c.max_tokens, "sample": k,
                   "messages": build_messages(component, parent.components.get(component, ""), dataset)}
        out = recorded_call(self.recorder, "reflection", c.reflection_lm, request, lambda: self._call(request))
        ids = [out.call_id] if out.call_id is not None else []
        if out.error is not None or out.response is None:
            return Draft(None, "reflection", "", ids, out.error or "no response", out.cost_usd)
        if out.response.get("rejected"):
            return Draft(None, "reflection", "", ids, out.response["rejected"], out.cost_usd)
        new = out.response["text"]
        if new == parent.components.get(component, "").strip():
            return Draft(None, "reflection", "", ids, "rejected: no change", out.cost_usd)
        return Draft(parent.with_component(component, new).components, "reflection",
                     f"{self.name} rewrote {component!r} from {len(dataset.records)} examples", ids,
                     None, out.cost_usd)

    def _call(self, request: dict) -> tuple[dict | None, str | None, dict, float]:
        """One LM call with retries; never raises for an LM failure."""
        import litellm  # lazy: ~8.5 s import

        c = self.config
        kwargs = {"model": request["model"], "messages": request["messages"], "temperature": c.temperature,
                  "max_tokens": c.max_tokens, "timeout": c.timeout_s, "num_retries": 0}
        if c.api_base:
            kwargs["api_base"] = c.api_base
            kwargs["api_key"] = os.environ.get(c.api_key_env or "", "") or "sk-local"
        elif c.api_key_env:
            kwargs["api_key"] = os.environ.get(c.api_key_env, "")
        error = "no attempt"
        for attempt in range(c.retries + 1):
            if attempt:
                self._sleep(c.backoff_s * 2 ** (attempt - 1))
            try:
                resp = litellm.completion(**kwargs)
            except Exception as e:  # noqa: BLE001 - any provider error is retried, then recorded
                error = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
                continue
            return self._parse(resp)
        return None, error, {}, 0.0

    def _parse(self, resp) -> tuple[dict, None, dict, float]:
        choice = resp.choices[0]
        content = choice.message.content
        usage = getattr(resp, "usage", None)
        tokens = {"prompt": getattr(usage, "prompt_tokens", 0) or 0,
                  "completion": getattr(usage, "completion_tokens", 0) or 0}
        cost = float((getattr(resp, "_hidden_params", None) or {}).get("response_cost") or 0.0)
        text, why = parse_reply(content, choice.finish_reason, self.config.max_component_chars)
        response = {"content": content, "finish_reason": choice.finish_reason}
        response.update({"text": text} if why is None else {"rejected": why})
        return response, None, tokens, cost
