"""What a generation produced, as comparable data: one row per rollout (completion, reward, verdict)
and its metrics without wall-clock timings. Replay compares these against the lineage, and the
resume tests compare whole lineages with them.

Rollouts are compared in the order they were produced (the store keeps insertion order). Weights
versions are left out of a rollout's row: the weights are compared once, by sha256.
"""

from __future__ import annotations

import hashlib
import json

# Wall-clock seconds differ on every run; everything else a generation records must not.
_VOLATILE = frozenset({"timings", "seconds", "latency_s"})


def rollout_row(r) -> tuple:
    """A Rollout or a stored RolloutRecord as (purpose, task, group, sample, prompt version,
    completion, reward, passed, error class, transcript digest ("" for a single-turn rollout))."""
    result = getattr(r, "result", None)
    error_class = result.error_class if result is not None else getattr(r, "error_class", None)
    return (r.purpose, r.task_id, int(r.group), int(r.sample_index), r.prompt_version, r.completion or "",
            float(r.reward), bool(r.passed), error_class, transcript_digest(getattr(r, "turns", None)))


def transcript_digest(turns) -> str:
    """Every turn's role, text, dense reward, observation hash and token span (Turn objects or stored dicts)."""
    if not turns:
        return ""
    rows = [t if isinstance(t, dict) else vars(t) for t in turns]
    keep = ("role", "content", "reward", "observation_hash", "token_span")
    return digest([[list(v) if isinstance(v, tuple) else v for v in (d.get(k) for k in keep)] for d in rows])


def stable_metrics(metrics: dict | None) -> dict:
    """Metrics without the wall-clock parts."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in _VOLATILE}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return strip(metrics or {})


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr, ensure_ascii=True).encode()).hexdigest()


def rollouts_digest(rows: list[tuple]) -> str:
    return digest([list(r) for r in rows])


_FIELDS = ("purpose", "task", "group", "sample", "prompt version", "completion", "reward", "passed", "error class",
           "transcript")


def first_rollout_difference(recorded: list[tuple], replayed: list[tuple]) -> str | None:
    for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
        if a != b:
            field = next(f for f, x, y in zip(_FIELDS, a, b, strict=True) if x != y)
            k = _FIELDS.index(field)
            return (f"rollout {i} ({a[0]} {a[1]}#{a[3]}): {field} recorded {short(a[k])} "
                    f"replayed {short(b[k])}")
    if len(recorded) != len(replayed):
        return f"rollout count: recorded {len(recorded)}, replayed {len(replayed)}"
    return None


def flatten(d, prefix: str = "") -> dict:
    out = {}
    if isinstance(d, dict):
        for k in sorted(d, key=str):
            out.update(flatten(d[k], f"{prefix}{k}."))
        if not d and prefix:
            out[prefix[:-1]] = {}
    else:
        out[prefix[:-1]] = d
    return out


def first_metric_difference(recorded: dict, replayed: dict) -> str | None:
    a, b = flatten(stable_metrics(recorded)), flatten(stable_metrics(replayed))
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            return f"metric {key}: recorded {short(a.get(key, '<absent>'))} replayed {short(b.get(key, '<absent>'))}"
    return None


def short(v, n: int = 60) -> str:
    text = repr(v)  # repr: control characters and odd text show escaped
    return text if len(text) <= n else text[:n - 3] + "..."


def generation_fingerprint(store, gen) -> dict:
    """Everything a committed generation recorded that a rerun must reproduce exactly."""
    wv = store.get_weights_version(gen.weights_version)
    rows = [rollout_row(r) for r in store.rollouts(gen.id)]
    return {"index": gen.index, "status": gen.status, "prompt_version": gen.prompt_version,
            "weights_sha256": wv.weights_sha256, "rollouts": rollouts_digest(rows), "n_rollouts": len(rows),
            "metrics": digest(stable_metrics(gen.metrics))}
