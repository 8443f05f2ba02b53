"""Guided retries without leakage (Agent-RLVR-style guidance, trained as if unguided).

When every sample of a task's group failed, GRPO has no signal there. The loop may then sample
retries whose first messages carry guidance built from the group's failures:

- ``errors``: the exceptions the failed attempts raised (compile/load errors and errors on the
  visible tests);
- ``visible_diff``: the visible tests the attempts got wrong, as "call returned X, expected Y";
- ``lessons``: the current reflection lessons.

Guidance only ever reads the ``compile`` and ``visible`` stages of a verdict: the visible tests
are the examples the prompt already shows. Hidden inputs and expected values live in the
``hidden`` stage, which is never read here. Lessons are the reflector's text and could quote a
hidden failure it was shown, so ``leakage_audit`` checks every guidance text for hidden-test
content and reports held-out pass@1 without guidance next to the guided figure.

Training as if unguided -- context distillation, chosen over importance correction and masking:
a guided retry's completion is re-tokenised under the UNGUIDED first messages (as
``evolve.loop.distill`` does for lesson prompts) and joins the failed group, so the group's
estimator compares the guided successes with the unguided failures and the update raises
log pi(completion | unguided prompt). Why: (1) the guidance never enters a trained input, so the
weights cannot learn to rely on or copy from it, and a policy never sees guidance at test time;
(2) the per-token importance ratio pi(y | x) / pi(y | x, guidance) of a completion that only
guidance made likely is tiny for most of its tokens, so importance correction would suppress
exactly the rare successes guidance exists to provide (and clipping would hide the mismatch);
(3) masking the guidance tokens would still condition every trained token on them. The cost,
written down: the update is off-policy (POPE 2601.18779, SAGE 2602.03143 make the same trade);
with ``grpo.old_logprobs = "behaviour"`` the stored guided log-probs turn the clipped ratio into a
clipped importance correction instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from evolve.env.episode import observation_hash  # GiGPO's anchor: the conversation the policy acted on
from evolve.metrics import GuidedMetrics
from evolve.rollout import Rollout
from evolve.verification.types import Task, VerifyResult

SOURCES = ("errors", "visible_diff", "lessons", "location")
PUBLIC_STAGES = ("compile", "visible")  # stages whose failures only quote what the task shows
_DIFF_KINDS = ("WrongAnswer", "TypeMismatch")
MAX_ITEMS = 3  # lines per source: small models have small contexts
# Shortest hidden-test rendering the audit looks for. Shorter ones ("[0]", "12", "True") occur in
# clean text by chance (a model's own wrong output in a visible diff), so a leak of such a short
# value alone is not detectable by quoting and is not flagged; inputs and calls are longer.
MIN_CHARS = 6


def failed_groups(groups: Sequence[list[Rollout]]) -> list[list[Rollout]]:
    """Groups in which no sample passed (the ones a guided retry may rescue)."""
    return [g for g in groups if g and not any(r.passed for r in g)]


def _public_stages(result: VerifyResult | None):
    return [s for s in (result.stages if result else []) if s.name in PUBLIC_STAGES and not s.skipped]


def _dedupe(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(x for x in lines if x))[:MAX_ITEMS]


def error_lines(results: Sequence[VerifyResult | None]) -> list[str]:
    """Exceptions of the attempts: load/compile errors and errors raised on visible tests."""
    out = []
    for res in results:
        for stage in _public_stages(res):
            if not stage.passed and not stage.failures:  # e.g. a SyntaxError: the stage's own trace
                out.append(stage.trace or stage.error_class or "")
            out += [f.message or f.error_type for f in stage.failures if f.error_type not in _DIFF_KINDS]
    return _dedupe(out)


def location_lines(results: Sequence[VerifyResult | None]) -> list[str]:
    """Agent-RLVR's fault location (file and function, never the fix): the ``location`` stage a
    repository verifier records (``evolve/env/repo_fix.py``); other verifiers have none."""
    out = [s.trace for res in results for s in (res.stages if res else []) if s.name == "location" and s.trace]
    return _dedupe([f"the fault is in {t}" for t in out])


def diff_lines(results: Sequence[VerifyResult | None]) -> list[str]:
    out = []
    for res in results:
        for f in (f for stage in _public_stages(res) for f in stage.failures):
            if f.error_type in _DIFF_KINDS and f.input_repr:
                out.append(f"{f.input_repr} returned {f.got_repr}, expected {f.expected_repr}")
    return _dedupe(out)


@dataclass(frozen=True)
class Guidance:
    text: str
    sources: list[str]  # the sources that contributed (recorded on each guided rollout)


def build_guidance(sources: Sequence[str], failed: Sequence[Rollout], lessons: Sequence[str] = ()) -> Guidance:
    """Guidance text for one failed group from the chosen ``sources`` (empty text when none applies)."""
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise ValueError(f"unknown guidance source {unknown[0]!r}; known: {', '.join(SOURCES)}")
    results = [r.result for r in failed]
    parts = {
        "errors": ("Errors in earlier attempts:", error_lines(results)),
        "visible_diff": ("Examples earlier attempts got wrong:", diff_lines(results)),
        "lessons": ("Lessons:", _dedupe([ln.strip() for ln in lessons])),
        "location": ("Where to look:", location_lines(results)),
    }
    blocks, used = [], []
    for s in sources:
        head, lines = parts[s]
        if lines:
            blocks.append("\n".join([head, *(f"- {ln}" for ln in lines)]))
            used.append(s)
    return Guidance("\n".join(blocks), used)


def guided_messages(messages: list[dict], guidance: Guidance) -> list[dict]:
    """The first messages with the guidance appended to the last user message."""
    out = [dict(m) for m in messages]
    idx = max((i for i, m in enumerate(out) if m.get("role") == "user"), default=len(out) - 1)
    out[idx]["content"] = f"{out[idx]['content']}\n\n{guidance.text}"
    return out


def as_unguided(r: Rollout, messages: list[dict], prompt_text: str, prompt_ids: list[int], sources: list[str],
                rehash: Callable[[list[dict]], str] = observation_hash) -> Rollout:
    """A guided retry as if sampled under the unguided first ``messages`` (context distillation).

    Completion tokens, mask, reward and verdict stay; the prompt is the unguided one; each policy
    turn's anchor hash is recomputed on the unguided conversation, so a retry that reaches an
    unguided attempt's state shares its GiGPO step group."""
    turns, conv = [], list(messages)
    for t in r.turns:
        h = rehash(conv) if t.role == "assistant" and t.observation_hash is not None else t.observation_hash
        turns.append(replace(t, observation_hash=h, advantage=None))
        conv.append({"role": t.role, "content": t.content})
    return replace(r, messages=list(messages), prompt_text=prompt_text, prompt_ids=list(prompt_ids), turns=turns,
                   advantage=None, guidance=list(sources))


def retry_group(failed: list[Rollout], guided: list[Rollout]) -> list[Rollout]:
    """The failed group joined by its unguided-tokenised retries: one advantage group for the update."""
    n = len(failed)
    return list(failed) + [replace(r, sample_index=n + i) for i, r in enumerate(guided)]


# ---- leakage audit ---------------------------------------------------------------------------

def _norm(text: str) -> str:
    return "".join(text.split())


def _value_forms(v) -> set[str]:
    forms = {repr(v)}
    if isinstance(v, str):
        forms.add(v)
    try:
        forms.add(json.dumps(v))
    except (TypeError, ValueError):
        pass
    return {_norm(f) for f in forms}


def hidden_fragments(task: Task, min_chars: int = MIN_CHARS) -> set[str]:
    """Distinctive renderings of the hidden tests' inputs, calls and expected values that the
    task does not show anyway (its prompt and visible tests), whitespace removed."""
    public = _norm(task.prompt) + "".join(
        f for t in task.visible_tests for v in (*t.inputs, t.expected) for f in _value_forms(v))
    frags: set[str] = set()
    for t in task.hidden_tests:
        frags.add(_norm(f"{task.entry_point}({', '.join(repr(a) for a in t.inputs)})"))
        for v in (*t.inputs, t.expected):
            frags |= _value_forms(v)
    # Repository tasks: the lines the injected bug replaced (the fix) are hidden content too.
    diff = str(task.meta.get("diff", ""))
    fixed = task.meta.get("leak_fragments") or [ln[1:] for ln in diff.splitlines() if ln[:1] == "-" and ln[:3] != "---"]
    frags |= {_norm(f) for f in fixed}
    return {f for f in frags if len(f) >= min_chars and f not in public}


def leaked_fragments(text: str, task: Task, min_chars: int = MIN_CHARS) -> list[str]:
    """The hidden-test fragments that ``text`` quotes (empty = clean)."""
    body = _norm(text)
    return sorted(f for f in hidden_fragments(task, min_chars) if f in body)


def leakage_audit(records: Sequence[tuple[Task, str]], heldout_pass1_unguided: float | None,
                  guided_pass1: float | None = None, min_chars: int = MIN_CHARS) -> GuidedMetrics:
    """Held-out pass@1 without guidance next to the guided figure, and every guidance text that
    quotes hidden-test content. ``records``: (task, guidance text) for each guidance given."""
    flagged = []
    for task, text in records:
        hits = leaked_fragments(text, task, min_chars)
        if hits:
            flagged.append({"task_id": task.task_id, "fragments": hits[:5]})
    return {"heldout_pass1_unguided": heldout_pass1_unguided, "guided_pass1": guided_pass1,
            "guidance_texts": len(records), "flagged": len(flagged), "flagged_tasks": flagged,
            "leak": bool(flagged)}

