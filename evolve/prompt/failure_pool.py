"""The pooled reflective dataset (``reflection_view = "pooled"``): failures of several generations,
grouped by failure class.

One generation's routed failures are few (the 0.5B/HumanEval ablation's reflector saw 2 tasks), and a
lesson worth writing is one that recurs. So each reflection step keeps a bounded entry of what it saw
(at most ``reflection_minibatch_size`` failure records, chosen round-robin over failure classes, its
signature groups and its demonstration candidates) in a window of ``failure_window`` steps. The window
is part of the evolver's state (prompt.json of every generation), so a resumed or replayed generation
pools exactly what the recorded one pooled.

A step's dataset takes its failure records round-robin over the pool's failure classes (most frequent
first), inside a class newest generation first, then alternating generations; successes of this step
follow for contrast, and the summary counts every failure the window saw.
"""

from __future__ import annotations

import random
from collections import Counter

from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.reflective_dataset import (
    ReflectiveDataset,
    demo_candidates,
    group_dict,
    rollout_record,
    round_robin,
)
from evolve.prompt.signatures import group_failures
from evolve.rollout import Rollout


def _by_class(records: list[dict], rng: random.Random) -> dict[str, list[dict]]:
    buckets: dict[str, list[dict]] = {}
    for rec in records:
        buckets.setdefault(rec["class"] or "Failure", []).append(rec)
    for b in buckets.values():
        rng.shuffle(b)
    return buckets


def window_entry(rollouts: list[Rollout], cfg: PromptEvolutionConfig, rng: random.Random,
                 generation: int) -> dict:
    """What one step adds to the window: a bounded, JSON-able summary of its rollouts."""
    failed = [r for r in rollouts if not r.passed]
    records = [{**rollout_record(r, cfg), "generation": generation} for r in failed]
    buckets = _by_class(records, rng)
    kept = round_robin([buckets[k] for k in sorted(buckets)], cfg.reflection_minibatch_size)
    demos = demo_candidates(rollouts, cfg)
    rng.shuffle(demos)
    return {"generation": generation, "n_rollouts": len(rollouts), "n_failures": len(failed),
            "groups": [group_dict(g) for g in group_failures(rollouts)], "failures": kept,
            "demos": demos[: 2 * cfg.max_demos]}


def _merge_groups(entries: list[dict]) -> list[dict]:
    """Signature groups summed over the window (most frequent first, ties by signature)."""
    merged: dict[str, dict] = {}
    for e in entries:
        for g in e["groups"]:
            m = merged.setdefault(g["signature"], {**g, "count": 0, "tasks": []})
            m["count"] += g["count"]
            m["tasks"] = list(dict.fromkeys(m["tasks"] + g["tasks"]))[:5]
    return sorted(merged.values(), key=lambda g: (-g["count"], g["signature"]))


def _classes(entries: list[dict]) -> list[dict]:
    count: Counter[str] = Counter()
    gens: dict[str, set[int]] = {}
    for e in entries:
        for g in e["groups"]:
            count[g["error_type"]] += g["count"]
            gens.setdefault(g["error_type"], set()).add(e["generation"])
    return [{"class": c, "count": n, "generations": sorted(gens[c])}
            for c, n in sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))]


def _interleave_generations(records: list[dict]) -> list[dict]:
    """Newest generation first, then one record of each generation in turn (the window, not one step)."""
    by_gen: dict[int, list[dict]] = {}
    for rec in records:
        by_gen.setdefault(rec["generation"], []).append(rec)
    return round_robin([by_gen[g] for g in sorted(by_gen, reverse=True)], len(records))


def build_pooled_dataset(rollouts: list[Rollout], window: list[dict], cfg: PromptEvolutionConfig,
                         rng: random.Random, generation: int) -> tuple[ReflectiveDataset, dict]:
    """The dataset of this step over ``window`` (earlier steps' entries) plus ``rollouts``; and this
    step's own entry, for the caller to push into the window."""
    entry = window_entry(rollouts, cfg, rng, generation)
    entries = [*window, entry]
    classes = _classes(entries)
    seen: set[tuple[str, str]] = set()
    pooled = []
    for e in reversed(entries):  # one copy of a reply that recurs (same task, same output)
        for rec in e["failures"]:
            if (rec["task_id"], rec["output"]) not in seen:
                seen.add((rec["task_id"], rec["output"]))
                pooled.append(rec)
    buckets = _by_class(pooled, rng)
    order = [c["class"] for c in classes if c["class"] in buckets] + sorted(set(buckets) - {c["class"] for c in classes})
    passed = [r for r in rollouts if r.passed]
    n_contrast = min(cfg.contrast_successes, len(passed)) if pooled else min(len(passed),
                                                                             cfg.reflection_minibatch_size)
    chosen = round_robin([_interleave_generations(buckets[c]) for c in order],
                          cfg.reflection_minibatch_size - n_contrast)
    failing_tasks = {r["task_id"] for r in chosen}
    rng.shuffle(passed)
    passed.sort(key=lambda r: r.task_id not in failing_tasks)  # same task, other outcome first
    chosen += [{**rollout_record(r, cfg), "generation": generation}
               for r in passed[: cfg.reflection_minibatch_size - len(chosen)]]
    demos, tasks = [], set()
    for e in reversed(entries):  # this step's successes first; one demonstration per task
        for d in e["demos"]:
            if d["task_id"] not in tasks:
                tasks.add(d["task_id"])
                demos.append(d)
    ds = ReflectiveDataset(_merge_groups(entries)[: cfg.max_signature_groups], chosen,
                           sum(e["n_rollouts"] for e in entries), sum(e["n_failures"] for e in entries),
                           demos[: 2 * cfg.max_demos] if cfg.max_demos > 0 else [], classes,
                           [e["generation"] for e in entries])
    ds.fit(cfg.max_reflection_chars, cfg.demo_budget)
    return ds, entry
