"""The reflective dataset: a bounded, JSON-able view of verified rollouts for a reflector.

Failures come first, round-robin over failure signatures so one frequent failure does
not crowd out the others; a few successes follow for contrast. The number of records
is capped by ``reflection_minibatch_size`` and every field and the whole dataset by a
character budget, so the reflection context never grows with the number of rollouts.

This module builds the ``reflection_view = "generation"`` dataset (one generation's routed rollouts,
fields cut at the end: the rule of runs recorded before the pooled view) and the per-rollout record both
views share; the pooled view (several generations, grouped by failure class) is evolve/prompt/failure_pool.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TypeVar

from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.signatures import SignatureGroup, group_failures, rollout_signature
from evolve.rollout import Rollout
from evolve.util.hashing import canonical_json

TRUNC_MARK = " …[truncated]"
T = TypeVar("T")


def truncate(text: str, limit: int) -> str:
    """Cut at the end (the "generation" view's rule, kept for recorded runs; the pooled view shortens
    in the middle: a reply's code ends where the mistake often is)."""
    text = text or ""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(TRUNC_MARK))] + TRUNC_MARK


def shorten_middle(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: its head and its tail with "... [N chars cut] ..." between
    them, never cut off at the end (a function's signature and its last lines both survive)."""
    text = text or ""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    while True:  # the mark's length depends on N: grow the cut until head + mark + tail fits
        mark = f"\n... [{cut} chars cut] ...\n"
        keep = limit - len(mark)
        if keep < 2:  # too small a limit for a mark: head and tail only
            return text[: limit - limit // 2] + text[len(text) - limit // 2:] if limit > 1 else text[:limit]
        if len(text) - keep <= cut:
            cut = len(text) - keep
            break
        cut = len(text) - keep
    tail = keep // 2
    return text[: keep - tail] + mark + text[len(text) - tail:]


def _task_text(r: Rollout) -> str:
    users = [m.get("content", "") for m in r.messages if m.get("role") == "user"]
    return users[-1] if users else r.prompt_text


def _feedback(r: Rollout, limit: int) -> str:
    return truncate(feedback_text(r), limit)


def feedback_text(r: Rollout) -> str:
    """The verifier's verdict as a reflector reads it (uncut): the first failures with their inputs,
    expected and got values, flags, and whether the output hit the token limit."""
    res = r.result
    if res is None:
        return "not verified"
    if res.passed:
        return f"passed (reward {res.reward:.2f})"
    parts = []
    for f in res.failures[:3]:
        line = f"{f.error_type} in {f.stage}"
        if f.input_repr:
            line += f": input {f.input_repr}"
        if f.expected_repr or f.got_repr:
            line += f", expected {f.expected_repr}, got {f.got_repr}"
        if f.message:
            line += f" ({f.message})"
        parts.append(line)
    if not parts and res.trace:
        parts.append(res.trace)
    if res.hack_flags:
        parts.append("flags: " + ", ".join(res.hack_flags))
    if r.truncated:
        parts.append("the output hit the token limit")
    return "; ".join(parts) or (res.error_class or "failed")


def transcript_text(r: Rollout, limit: int, cut=truncate) -> str:
    """A multi-turn episode as the reflector reads it: each policy turn (with its visible-test
    score) and the environment's answer, so a lesson can address the repair, not only turn 1."""
    lines = []
    for i, t in enumerate(r.turns):
        if t.role == "assistant":
            score = "" if t.reward is None else f" (visible tests {t.reward:.2f})"
            lines.append(f"[policy turn{score}]\n{t.content}")
        else:
            lines.append(f"[{t.role} {i}]\n{t.content}")
    return cut("\n".join(lines), limit)


def rollout_record(r: Rollout, cfg: PromptEvolutionConfig) -> dict:
    """One rollout as a reflector reads it, under the config's view (see the module docstring)."""
    if cfg.reflection_view == "pooled":
        return pooled_record(r, cfg)
    sig = rollout_signature(r)
    record = {
        "task_id": r.task_id,
        "passed": r.passed,
        "reward": round(float(r.result.reward if r.result else r.reward), 4),
        "inputs": truncate(_task_text(r), cfg.max_field_chars),
        "output": truncate(r.completion, cfg.max_field_chars),
        "output_truncated": len(r.completion or "") > cfg.max_field_chars,
        "feedback": _feedback(r, cfg.max_field_chars),
        "signature": sig.key if sig else None,
    }
    if r.turns:  # multi-turn: the whole transcript (single-turn records keep their old shape)
        record["turns"] = sum(1 for t in r.turns if t.role == "assistant")
        record["transcript"] = transcript_text(r, 2 * cfg.max_field_chars)
    return record


def failure_class(r: Rollout) -> str:
    """The verifier's class of a failed rollout (WrongAnswer, TypeMismatch, SyntaxError, ...)."""
    sig = rollout_signature(r)
    return sig.error_type if sig else (r.result.error_class if r.result and r.result.error_class else "Failure")


def pooled_record(r: Rollout, cfg: PromptEvolutionConfig) -> dict:
    """The pooled view's record: fields shortened in the middle, the failure class, and the first failing
    check's call, expected and got values where the verifier has them."""
    limit = cfg.max_field_chars
    sig = rollout_signature(r)
    record = {
        "task_id": r.task_id, "passed": r.passed,
        "reward": round(float(r.result.reward if r.result else r.reward), 4),
        "class": None if r.passed else failure_class(r),
        "inputs": shorten_middle(_task_text(r), limit),
        "output": shorten_middle(r.completion, limit),
        "output_truncated": len(r.completion or "") > limit,
        "feedback": shorten_middle(feedback_text(r), limit),
        "signature": sig.key if sig else None,
    }
    checked = next((f for f in (r.result.failures if r.result else []) if f.expected_repr or f.got_repr), None)
    if checked is not None:
        record.update({"call": shorten_middle(checked.input_repr, limit // 2),
                       "expected": shorten_middle(checked.expected_repr, limit // 2),
                       "got": shorten_middle(checked.got_repr, limit // 2)})
    if r.turns:
        record["turns"] = sum(1 for t in r.turns if t.role == "assistant")
        record["transcript"] = transcript_text(r, 2 * limit, shorten_middle)
    return record


@dataclass
class ReflectiveDataset:
    """What a reflector sees. ``groups`` summarise all failures; ``records`` are the bounded minibatch."""

    groups: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    n_rollouts: int = 0
    n_failures: int = 0
    demo_pool: list[dict] = field(default_factory=list)  # verified successes that may become demos
    # pooled view only: failure classes over the pool [{class, count, generations}]; None in the generation view
    classes: list[dict] | None = None
    generations: list[int] | None = None  # pooled view only: the generations the pool holds

    def to_dict(self) -> dict:
        d = {"groups": self.groups, "records": self.records, "n_rollouts": self.n_rollouts,
             "n_failures": self.n_failures, "demo_pool": self.demo_pool}
        if self.classes is not None:  # the generation view's dict (recorded requests) keeps its old keys
            d.update(classes=self.classes, generations=self.generations)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ReflectiveDataset:
        return cls(list(d.get("groups", [])), list(d.get("records", [])), int(d.get("n_rollouts", 0)),
                   int(d.get("n_failures", 0)), list(d.get("demo_pool", [])), d.get("classes"),
                   d.get("generations"))

    def chars(self) -> int:
        return len(canonical_json(self.to_dict()))

    def budgeted_chars(self, demo_budget: str) -> int:
        """What ``max_reflection_chars`` bounds: everything, or (``demo_budget = "own"``) all but the
        demonstration pool, which no LM reflector reads and which has its own bound (2 x ``max_demos``
        entries, each field at most ``max_field_chars``)."""
        if demo_budget == "shared" or not self.demo_pool:
            return self.chars()
        return len(canonical_json({**self.to_dict(), "demo_pool": []}))

    def fit(self, budget: int, demo_budget: str) -> None:
        """Within ``budget`` characters (``budgeted_chars``): drop records from the end (successes, then the
        rarest failures), then (a shared budget only) demonstrations, then signature groups."""
        parts = (self.records, self.demo_pool, self.groups) if demo_budget == "shared" else (self.records, self.groups)
        for part in parts:
            while part and self.budgeted_chars(demo_budget) > budget:
                part.pop()


def group_dict(g: SignatureGroup) -> dict:
    return {"signature": g.signature.key, "error_type": g.signature.error_type,
            "features": sorted(g.signature.features), "count": g.count, "tasks": g.task_ids[:5]}


def round_robin(buckets: list[list[T]], limit: int) -> list[T]:
    """One item of each bucket in turn (buckets are consumed) until ``limit`` or all are empty."""
    out: list[T] = []
    i = 0
    while len(out) < limit and any(buckets):
        b = buckets[i % len(buckets)]
        if b:
            out.append(b.pop(0))
        i += 1
    return out


def build_reflective_dataset(rollouts: list[Rollout], cfg: PromptEvolutionConfig,
                             rng: random.Random) -> ReflectiveDataset:
    groups = group_failures(rollouts)
    failed = [r for r in rollouts if not r.passed]
    passed = [r for r in rollouts if r.passed]
    by_sig: dict[str, list[Rollout]] = {g.signature.key: [] for g in groups}
    for r in failed:
        by_sig[rollout_signature(r).key].append(r)
    for bucket in by_sig.values():
        rng.shuffle(bucket)
    n_contrast = min(cfg.contrast_successes, len(passed)) if failed else min(len(passed),
                                                                             cfg.reflection_minibatch_size)
    chosen = round_robin([by_sig[g.signature.key] for g in groups], cfg.reflection_minibatch_size - n_contrast)
    # Contrast: successes on the failing tasks first (same task, different outcome), then any.
    failing_tasks = {r.task_id for r in chosen}
    rng.shuffle(passed)
    passed.sort(key=lambda r: r.task_id not in failing_tasks)
    chosen += passed[: cfg.reflection_minibatch_size - len(chosen)]
    ds = ReflectiveDataset([group_dict(g) for g in groups[: cfg.max_signature_groups]],
                           [rollout_record(r, cfg) for r in chosen], len(rollouts), len(failed),
                           _demo_pool(rollouts, cfg, rng))
    ds.fit(cfg.max_reflection_chars, cfg.demo_budget)
    return ds


def successes_for_demos(rollouts: list[Rollout]) -> list[Rollout]:
    """Verified, untruncated, unflagged successes sampled on training tasks (purpose "train": never a
    held-out or validation task's, never a guided retry's): the only rollouts allowed to become demonstrations."""
    return [r for r in rollouts if r.passed and r.purpose == "train" and not r.truncated
            and not (r.result and r.result.hack_flags)]


def demo_candidates(rollouts: list[Rollout], cfg: PromptEvolutionConfig) -> list[dict]:
    """One demonstration per task (first success), whole: a task or solution longer than
    ``max_field_chars`` is skipped, never cut (a cut demonstration teaches a broken solution)."""
    pool, seen = [], set()
    for r in successes_for_demos(rollouts):
        text = _task_text(r)
        if r.task_id in seen or len(text) > cfg.max_field_chars or len(r.completion) > cfg.max_field_chars:
            continue
        seen.add(r.task_id)
        pool.append({"task_id": r.task_id, "inputs": text, "output": r.completion.strip()})
    return pool


def _demo_pool(rollouts: list[Rollout], cfg: PromptEvolutionConfig, rng: random.Random) -> list[dict]:
    if cfg.max_demos <= 0:
        return []
    pool = demo_candidates(rollouts, cfg)
    rng.shuffle(pool)
    return pool[: 2 * cfg.max_demos]
