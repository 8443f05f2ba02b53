"""pass@k of a policy on a task suite, with the unbiased estimator, per task and overall."""

from __future__ import annotations

import time
from collections import Counter

from evolve.prompt.candidate import render_messages
from evolve.util.passk import pass_at_k
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
                       ks: list[int], verifier, seed: int = 0, batch_tasks: int = 16) -> dict:
    """Generate ``samples`` completions per task, verify them, and report pass@k.

    Returns {"overall": {"pass@k": ...}, "tasks": {task_id: {"n", "c", "pass@k"...}}, "n_tasks",
    "samples", "ks", "failure_classes", "seconds": {"generate", "verify"}}.
    """
    per_task: dict[str, dict] = {}
    failures: Counter = Counter()
    t_gen = t_ver = 0.0
    for start in range(0, len(tasks), batch_tasks):
        chunk = tasks[start:start + batch_tasks]
        t0 = time.perf_counter()
        outs = policy.generate([render_messages(prompt_components, t) for t in chunk], n=samples,
                               seed=seed + start)
        t1 = time.perf_counter()
        results = verifier.verify_batch([(t, s.text) for t, group in zip(chunk, outs, strict=True) for s in group])
        t_ver += time.perf_counter() - t1
        t_gen += t1 - t0
        it = iter(results)
        for task, group in zip(chunk, outs, strict=True):
            verdicts = [next(it) for _ in group]
            c = sum(bool(v.passed) for v in verdicts)
            failures.update(v.error_class or "Unknown" for v in verdicts if not v.passed)
            row = {"n": len(verdicts), "c": c}
            row.update({f"pass@{k}": pass_at_k(len(verdicts), c, k) for k in ks})
            per_task[task.task_id] = row
    overall = {f"pass@{k}": (sum(r[f"pass@{k}"] for r in per_task.values()) / len(per_task) if per_task else 0.0)
               for k in ks}
    return {"overall": overall, "tasks": per_task, "n_tasks": len(per_task), "samples": samples, "ks": list(ks),
            "failure_classes": dict(failures.most_common()),
            "seconds": {"generate": round(t_gen, 3), "verify": round(t_ver, 3)}}
