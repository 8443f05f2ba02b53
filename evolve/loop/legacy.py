"""Run configs recorded before ``[loop.selection]`` and ``[loop.prompt]`` existed: flat selection keys,
options that have since been deleted because they measured worse, and six prompt-evolution settings
the loop held under names of its own (``MOVED``), and loop keys added since with a new default.

A recorded run resumes and replays under the rules it ran with, or not at all. So an old flat config
is rewritten into the nested one when every rule it used still exists (the result is the same
config, and replays hash-equal), and refused with one line naming the code version that recorded it
when it used a deleted rule: check that version out to resume or replay such a run.
"""

from __future__ import annotations

from typing import Any

from evolve.errors import ConfigError
from evolve.prompt.config import RECORDED_ABSENT_MEANT as PROMPT_ABSENT_MEANT

# Keys added with a new default: absent from an older record means the behaviour before them.
_ABSENT_MEANT = {"promote_test": "betting", "thompson_variance": "fixed", "selection_score": "reward"}
# Loop keys added with a new default, in either format: absent from an older record means the rule before them.
_LOOP_ABSENT_MEANT = {"update_prompt": "sampled"}  # every coupled run before it trained under the sampled prompt
# Deleted rules: legacy key -> the one value that still exists, per selection type it mattered to.
_KEPT_IN_GROUP = {"challengers": 1, "challenger_pick": "thompson", "thompson_variance": "empirical",
                  "thompson_untried_first": False, "evict_margin": 0.0, "baseline": "task",
                  "promote_test": "signflip", "selection_score": "passed"}
_KEPT_GATE = {"gate_rule": "signflip", "promotion": "best_val", "reuse_candidate_rollouts": "winner",
              "selection_score": "passed"}
_IN_GROUP_KEYS = ("challenger_pool", "thompson_prior_sd", "evict_below", "promote_alpha", "promote_looks",
                  "promote_margin", "retire_alpha", "evidence_cap")
_GATE_KEYS = ("minibatch_tasks", "minibatch_samples", "val_tasks", "val_samples", "gate_alpha", "gate_margin")
_DROPPED = ("challenger_samples", "noninferior_tolerance", *_KEPT_IN_GROUP, *_KEPT_GATE)
# The loop's own names for prompt-evolution settings -> their one name in [loop.prompt].
MOVED = {"reflection_lm": "reflection_lm", "reflection_api_base": "api_base", "reflection_timeout_s": "timeout_s",
         "proposals_per_generation": "proposals_per_step", "lessons_dir": "lessons_dir", "max_lessons": "max_lessons"}


# [loop.selection] types deleted as measured worse (the nested format's refusals), with the last commit that had them.
_DELETED_TYPES = {"value": "a60b6b2"}
# In-group fields deleted as measured no better: field -> (the value that meant "off", its companion fields, the
# last commit that had them). A record with the field off is the same config without them; one with it on is refused.
_DELETED_IN_GROUP = {"lean_after_looks": (0, ("lean_samples", "promising_p"), "3c63e23"),
                     "futility_margin": (0.0, (), "be4783c")}


def upgrade_recorded(data: dict[str, Any], source: str, recorded_by: str | None = None) -> dict[str, Any]:
    """The nested config equivalent to a recorded one (a nested one gets only the loop keys added since it
    was recorded, at the values that mean what it ran under: ``_LOOP_ABSENT_MEANT``)."""
    selection = data.get("selection")
    if isinstance(selection, dict) and selection.get("type") in _DELETED_TYPES:
        kind = selection["type"]
        by = f"evolve {recorded_by}" if recorded_by else f"an evolve up to {_DELETED_TYPES[kind]}"
        raise ConfigError(f"{source}: recorded by {by} under selection.type = {kind!r}, a rule this version no "
                          f"longer has (deleted as measured worse); check out that version to resume or replay it")
    data = {**_LOOP_ABSENT_MEANT, **data}
    out = _nest_prompt(_nest_selection(_drop_deleted_fields(data, source, recorded_by), source, recorded_by))
    if isinstance(out.get("prompt"), dict):  # no table at all: every prompt field at its default, no demos
        out["prompt"] = {**PROMPT_ABSENT_MEANT, **out["prompt"]}
    return out


def _drop_deleted_fields(data: dict[str, Any], source: str, recorded_by: str | None) -> dict[str, Any]:
    selection = data.get("selection")
    if not isinstance(selection, dict) or not any(k in selection for k in _DELETED_IN_GROUP):
        return data
    for key, (off, companions, commit) in _DELETED_IN_GROUP.items():
        if selection.get(key, off) != off:
            by = f"evolve {recorded_by}" if recorded_by else f"an evolve up to {commit}"
            raise ConfigError(f"{source}: recorded by {by} under selection.{key} = {selection[key]!r}, a rule this "
                              f"version no longer has (measured no better); check out that version to resume or "
                              f"replay it")
        selection = {k: v for k, v in selection.items() if k != key and k not in companions}
    return {**data, "selection": selection}


def _nest_prompt(data: dict[str, Any]) -> dict[str, Any]:
    """The loop's flat prompt-evolution keys as the [loop.prompt] table they always configured (the
    evolver was built from exactly these, every other field at its default, so it is the same config)."""
    if "prompt" in data or not any(k in data for k in MOVED):
        return data
    prompt = {MOVED[k]: v for k, v in data.items() if k in MOVED}
    return {**{k: v for k, v in data.items() if k not in MOVED}, "prompt": prompt}


def _nest_selection(data: dict[str, Any], source: str, recorded_by: str | None) -> dict[str, Any]:
    if not isinstance(data.get("selection", "in_group"), str):
        return data
    old = {**_ABSENT_MEANT, **data}
    kind = old.get("selection", "in_group")
    if old.get("mode", "coupled") != "weights":  # weights-only ran no prompt selection at all
        _refuse_deleted(old, kind, source, recorded_by)
    keys = _IN_GROUP_KEYS if kind == "in_group" else _GATE_KEYS
    selection = {"type": kind, **{k: old[k] for k in keys if k in old}}
    if selection.get("evict_below", 0) is None:  # None meant "never", now 0
        selection["evict_below"] = 0.0
    dropped = set(_DROPPED) | set(_IN_GROUP_KEYS) | set(_GATE_KEYS)
    return {**{k: v for k, v in old.items() if k not in dropped}, "selection": selection}


def _refuse_deleted(old: dict[str, Any], kind: str, source: str, recorded_by: str | None) -> None:
    kept = dict(_KEPT_IN_GROUP if kind == "in_group" else _KEPT_GATE)
    if old.get("reward") == "random":  # the control scored its own draw whatever selection_score said
        kept.pop("selection_score")
    used = {k: old[k] for k, v in kept.items() if k in old and old[k] != v}
    if kind == "in_group":
        half = old.get("samples_per_task", 8) // 2
        if old.get("challenger_samples") not in (None, half):
            used["challenger_samples"] = old["challenger_samples"]
    if used:
        key, value = next(iter(sorted(used.items())))
        by = f"evolve {recorded_by}" if recorded_by else "an older evolve"
        raise ConfigError(f"{source}: recorded by {by} under {key} = {value!r}, a rule this version no "
                          f"longer has (deleted as measured worse); check out that version to resume or replay it")
