"""The reflective dataset: a bounded, JSON-able view of verified rollouts for a reflector.

Failures come first, round-robin over failure signatures so one frequent failure does
not crowd out the others; a few successes follow for contrast. The number of records
is capped by ``reflection_minibatch_size`` and every field and the whole dataset by a
character budget, so the reflection context never grows with the number of rollouts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.signatures import SignatureGroup, group_failures, rollout_signature
from evolve.rollout import Rollout
from evolve.util.hashing import canonical_json

TRUNC_MARK = " …[truncated]"


def truncate(text: str, limit: int) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(TRUNC_MARK))] + TRUNC_MARK


def _task_text(r: Rollout) -> str:
    users = [m.get("content", "") for m in r.messages if m.get("role") == "user"]
    return users[-1] if users else r.prompt_text


def _feedback(r: Rollout, limit: int) -> str:
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
    return truncate("; ".join(parts) or (res.error_class or "failed"), limit)


def transcript_text(r: Rollout, limit: int) -> str:
    """A multi-turn episode as the reflector reads it: each policy turn (with its visible-test
    score) and the environment's answer, so a lesson can address the repair, not only turn 1."""
    lines = []
    for i, t in enumerate(r.turns):
        if t.role == "assistant":
            score = "" if t.reward is None else f" (visible tests {t.reward:.2f})"
            lines.append(f"[policy turn{score}]\n{t.content}")
        else:
            lines.append(f"[{t.role} {i}]\n{t.content}")
    return truncate("\n".join(lines), limit)


def rollout_record(r: Rollout, cfg: PromptEvolutionConfig) -> dict:
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


@dataclass
class ReflectiveDataset:
    """What a reflector sees. ``groups`` summarise all failures; ``records`` are the bounded minibatch."""

    groups: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    n_rollouts: int = 0
    n_failures: int = 0
    demo_pool: list[dict] = field(default_factory=list)  # verified successes that may become demos

    def to_dict(self) -> dict:
        return {"groups": self.groups, "records": self.records, "n_rollouts": self.n_rollouts,
                "n_failures": self.n_failures, "demo_pool": self.demo_pool}

    @classmethod
    def from_dict(cls, d: dict) -> ReflectiveDataset:
        return cls(list(d.get("groups", [])), list(d.get("records", [])), int(d.get("n_rollouts", 0)),
                   int(d.get("n_failures", 0)), list(d.get("demo_pool", [])))

    def chars(self) -> int:
        return len(canonical_json(self.to_dict()))


def _group_dict(g: SignatureGroup) -> dict:
    return {"signature": g.signature.key, "error_type": g.signature.error_type,
            "features": sorted(g.signature.features), "count": g.count, "tasks": g.task_ids[:5]}


def _round_robin(buckets: list[list[Rollout]], limit: int) -> list[Rollout]:
    out: list[Rollout] = []
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
    chosen = _round_robin([by_sig[g.signature.key] for g in groups], cfg.reflection_minibatch_size - n_contrast)
    # Contrast: successes on the failing tasks first (same task, different outcome), then any.
    failing_tasks = {r.task_id for r in chosen}
    rng.shuffle(passed)
    passed.sort(key=lambda r: r.task_id not in failing_tasks)
    chosen += passed[: cfg.reflection_minibatch_size - len(chosen)]
    ds = ReflectiveDataset([_group_dict(g) for g in groups[: cfg.max_signature_groups]],
                           [rollout_record(r, cfg) for r in chosen], len(rollouts), len(failed),
                           _demo_pool(rollouts, cfg, rng))
    # Enforce the total budget: drop records from the end (successes, then the rarest failures).
    while ds.records and ds.chars() > cfg.max_reflection_chars:
        ds.records.pop()
    while ds.demo_pool and ds.chars() > cfg.max_reflection_chars:
        ds.demo_pool.pop()
    while ds.groups and ds.chars() > cfg.max_reflection_chars:
        ds.groups.pop()
    return ds


def successes_for_demos(rollouts: list[Rollout]) -> list[Rollout]:
    """Verified, untruncated, unflagged successes: the only rollouts allowed to become demonstrations."""
    return [r for r in rollouts if r.passed and not r.truncated and not (r.result and r.result.hack_flags)]


def _demo_pool(rollouts: list[Rollout], cfg: PromptEvolutionConfig, rng: random.Random) -> list[dict]:
    if cfg.max_demos <= 0:
        return []
    pool, seen = [], set()
    for r in successes_for_demos(rollouts):
        text = _task_text(r)
        if r.task_id in seen or len(text) > cfg.max_field_chars or len(r.completion) > cfg.max_field_chars:
            continue
        seen.add(r.task_id)
        pool.append({"task_id": r.task_id, "inputs": text, "output": r.completion.strip()})
    rng.shuffle(pool)
    return pool[: 2 * cfg.max_demos]
