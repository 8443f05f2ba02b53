"""pass@k of a policy on a task suite, with the unbiased estimator, per task and overall."""

from __future__ import annotations

import time
from collections import Counter

from evolve.verification.types import Task


def parse_ks(text: str, samples: int) -> list[int]:
    """'1,4,16' -> [1, 4, 16], dropping any k above the sample count (pass@k needs k <= n)."""
    from evolve.errors import ConfigError

    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise ConfigError(f"--k must be a comma-separated list of integers, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise ConfigError(f"--k values must be positive, got {text!r}")
    kept = [k for k in ks if k <= samples]
    if not kept:
        raise ConfigError(f"every k in {text!r} exceeds --samples {samples}")
    return kept


def evaluate_pass_at_k(policy, tasks: list[Task], prompt_components: dict[str, str], samples: int,
                       ks: list[int], verifier, seed: int = 0, batch_tasks: int = 16, env=None,
                       originals: dict[str, Task] | None = None) -> dict:
    """Generate ``samples`` episodes per task through the episode path, verify them, report pass@k.

    ``env``: the environment that renders and answers (default: single-turn, the plain rendering).
    Returns {"overall": {"pass@k": ...}, "tasks": {task_id: {"n", "c", "pass@k"...}}, "n_tasks",
    "samples", "ks", "failure_classes", "seconds": {"generate", "verify"}, "max_turns", "turns"}
    (``turns``: episodes by their number of policy turns, e.g. {"1": 3, "3": 5}).
    ``originals``: under a verifier version (``tasks`` carry its added tests), task id -> the task before;
    the report then also has "original": {"overall": pass@k under the tasks' own tests, "gap": own minus
    augmented, "reverified": samples verified a second time, "seconds"}.
    """
    from evolve.env.episode import collect, pass_at_k_rows, passed_before_augmentation, verify
    from evolve.env.suites import SuiteEnv

    env = env or SuiteEnv("tasks", lambda: {"heldout": tasks})
    cand = _Prompt(dict(prompt_components))
    by_id = {t.task_id: t for t in tasks}
    per_task: dict[str, dict] = {}
    failures: Counter = Counter()
    turns: Counter = Counter()
    own_rows: dict[str, dict] = {}
    t_gen = t_ver = t_own = 0.0
    again = 0
    for start in range(0, len(tasks), batch_tasks):
        t0 = time.perf_counter()
        rolls = collect(env, policy, cand, tasks[start:start + batch_tasks], samples, seed + start, "heldout", "",
                        verifier)
        t1 = time.perf_counter()
        verify(verifier, by_id, rolls, None)
        t_ver += time.perf_counter() - t1
        t_gen += t1 - t0
        failures.update(r.result.error_class or "Unknown" for r in rolls if not r.passed)
        turns.update(str(max(1, sum(t.role == "assistant" for t in r.turns))) for r in rolls)
        per_task.update(pass_at_k_rows(rolls, ks))
        if originals:
            t2 = time.perf_counter()
            passed, n = passed_before_augmentation(verifier, originals, rolls)
            own_rows.update(pass_at_k_rows(rolls, ks, passed))
            again, t_own = again + n, t_own + time.perf_counter() - t2
    overall = _overall(per_task, ks)
    extra = {}
    if originals:
        own = _overall(own_rows, ks)
        extra["original"] = {"overall": own, "gap": {k: own[k] - overall[k] for k in own}, "reverified": again,
                             "seconds": round(t_own, 3)}
    return {**extra, "overall": overall, "tasks": per_task, "n_tasks": len(per_task), "samples": samples, "ks": list(ks),
            "failure_classes": dict(failures.most_common()),
            "seconds": {"generate": round(t_gen, 3), "verify": round(t_ver, 3)},
            "max_turns": getattr(env, "max_turns", 1), "turns": dict(sorted(turns.items(), key=lambda kv: int(kv[0])))}


def _overall(rows: dict[str, dict], ks: list[int]) -> dict[str, float]:
    return {f"pass@{k}": (sum(r[f"pass@{k}"] for r in rows.values()) / len(rows) if rows else 0.0) for k in ks}


class _Prompt:
    """Prompt components as the episode path wants them (no prompt-package import here)."""

    def __init__(self, components: dict[str, str]) -> None:
        self.components = components
        self.id = ""
