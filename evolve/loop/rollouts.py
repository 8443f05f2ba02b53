"""Rolling out a prompt candidate with the policy, verifying, and scoring.

The loop owns rollouts: the same objects feed the weight update, reflection and
the lineage.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict

import numpy as np

from evolve.loop.routing import failure_class
from evolve.prompt.candidate import Candidate, render_messages
from evolve.rollout import Rollout
from evolve.util.passk import pass_at_k
from evolve.verification.types import Task

PENDING_WEIGHTS = "pending"  # replaced by the new weights version at commit


def roll_out(policy, candidate: Candidate, tasks: list[Task], n: int, seed: int, purpose: str,
             weights_version: str) -> list[Rollout]:
    """G samples per task through the chat template; not yet verified."""
    messages = [render_messages(candidate.components, t) for t in tasks]
    per_prompt = policy.generate(messages, n=n, seed=seed)
    rollouts = []
    for group, (task, msgs, samples) in enumerate(zip(tasks, messages, per_prompt, strict=True)):
        for i, s in enumerate(samples):
            rollouts.append(Rollout(
                task_id=task.task_id, group=group, sample_index=i, prompt_version=candidate.id,
                weights_version=weights_version, messages=msgs, prompt_text=s.prompt_text,
                completion=s.text, purpose=purpose, prompt_ids=list(s.prompt_ids),
                completion_ids=list(s.completion_ids), logprobs=list(s.logprobs), truncated=bool(s.truncated),
            ))
    return rollouts


def verify(verifier, tasks_by_id: dict[str, Task], rollouts: list[Rollout], random_seed: int | None) -> None:
    """Attach verdicts. With ``random_seed`` the learning reward is Bernoulli(0.5) (the control);
    the verdict itself (and so held-out scores and reflection traces) stays real."""
    results = verifier.verify_batch([(tasks_by_id[r.task_id], r.completion) for r in rollouts])
    for r, res in zip(rollouts, results, strict=True):
        r.result = res
        if random_seed is not None and r.purpose != "heldout":
            r.reward = random_reward(random_seed, r)
        else:
            r.reward = float(res.reward)


def random_reward(seed: int, r: Rollout) -> float:
    """The control's reward: Bernoulli(0.5) keyed by the seed and the rollout's prompt, task, sample
    and text. Two prompts (a challenger and its incumbent, a proposal and its parent) get independent
    draws, so noise can make either look better; the same rollout always gets the same draw."""
    key = zlib.crc32(f"{r.prompt_version}|{r.task_id}|{r.sample_index}|{r.purpose}|{r.completion}".encode())
    return float(np.random.default_rng([seed, key]).random() < 0.5)


def task_scores(rollouts: list[Rollout]) -> dict[str, float]:
    """Mean reward per task (several samples per task smooth noisy scores)."""
    sums: dict[str, list[float]] = defaultdict(list)
    for r in rollouts:
        sums[r.task_id].append(r.reward)
    return {t: float(np.mean(v)) for t, v in sums.items()}


def heldout_metrics(rollouts: list[Rollout], ks: tuple[int, ...]) -> dict:
    """pass@k (unbiased) over tasks, plus the failure-class counts."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in rollouts:
        per_task[r.task_id].append(r.passed)
    out = {}
    for k in ks:
        vals = [pass_at_k(len(v), sum(v), k) for v in per_task.values() if len(v) >= k]
        out[f"pass@{k}"] = float(np.mean(vals)) if vals else 0.0
    classes = Counter(c for c in (failure_class(r) for r in rollouts) if c)
    out["failure_classes"] = dict(sorted(classes.items()))
    out["samples"] = len(rollouts)
    out["tasks"] = len(per_task)
    return out
