"""Sampling guided retries for all-fail groups through the one episode path (see ``evolve.loop.guided``).

The environment is wrapped so that only the first messages change (guidance appended); every
later turn is the environment's own. The retries are verified like any rollout, then re-tokenised
under the unguided first messages and joined to their failed group for the update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evolve.env.base import Environment
from evolve.env.episode import collect, verify
from evolve.loop.guided import (
    Guidance,
    as_unguided,
    build_guidance,
    failed_groups,
    guided_messages,
    leakage_audit,
    retry_group,
)
from evolve.metrics import GuidedMetrics
from evolve.prompt.candidate import Candidate
from evolve.rollout import Rollout
from evolve.verification.types import Task

if TYPE_CHECKING:
    from evolve.loop.context import LoopContext


@dataclass
class _GuidedEnv:
    """``env`` with each task's guidance appended to its first messages (everything else delegated)."""

    env: Environment
    guidance: dict[str, Guidance]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def first_messages(self, components: dict[str, str], task: Task) -> list[dict]:
        return guided_messages(self.env.first_messages(components, task), self.guidance[task.task_id])


@dataclass
class GuidedRetries:
    groups: list[list[Rollout]]  # failed group + its retries (unguided tokens), one per rescued task
    retries: list[Rollout]  # the guided samples as sampled (guided messages), for the record
    audit: GuidedMetrics  # leakage audit of every guidance text given

    def metrics(self) -> GuidedMetrics:
        """The generation's ``guided`` metrics: the audit and the counts (held-out's unguided pass@1 is
        filled in by the controller once held-out is measured)."""
        return {**self.audit, "groups": len(self.groups), "retries": len(self.retries),
                "rescued_groups": sum(any(r.passed for r in grp) for grp in self.groups)}


def guided_retries(env, policy, verifier, candidate, groups: list[list[Rollout]], tasks_by_id: dict[str, Task],
                   sources: list[str], lessons: list[str], n: int, seed: int, weights_version: str,
                   max_groups: int | None = None) -> GuidedRetries:
    """``n`` guided retries per all-fail group (at most ``max_groups``), verified and made unguided.

    ``verifier`` is the environment's (already wrapped) verifier. The audit's held-out figure is
    filled in by the caller, which measures held-out pass@1 without guidance."""
    failed = failed_groups(groups)[:max_groups]
    guidance = {g[0].task_id: build_guidance(sources, g, lessons) for g in failed}
    failed = [g for g in failed if guidance[g[0].task_id].text]
    if not failed:
        return GuidedRetries([], [], leakage_audit([], heldout_pass1_unguided=None))
    tasks = [tasks_by_id[g[0].task_id] for g in failed]
    retries = collect(_GuidedEnv(env, guidance), policy, candidate, tasks, n, seed, "guided", weights_version,
                      verifier)
    verify(verifier, tasks_by_id, retries, None)
    for r in retries:
        r.guidance = list(guidance[r.task_id].sources)
    tokenizer = policy.tokenizer
    from evolve.policy.chat import encode_prompt

    out = []
    for group, task in zip(failed, tasks, strict=True):
        msgs = env.first_messages(candidate.components, task)
        text, ids = encode_prompt(tokenizer, msgs)
        mine = [r for r in retries if r.task_id == task.task_id]
        plain = [as_unguided(r, msgs, text, list(ids), guidance[task.task_id].sources, **_rehash(env, task))
                 for r in mine]
        out.append(retry_group(group, plain))
    guided_pass1 = sum(r.passed for r in retries) / len(retries) if retries else 0.0
    audit = leakage_audit([(t, guidance[t.task_id].text) for t in tasks], heldout_pass1_unguided=None,
                          guided_pass1=guided_pass1)
    return GuidedRetries(out, retries, audit)


def guided_update_groups(ctx: LoopContext, prompt: Candidate, groups: list[list[Rollout]], seed: int,
                         weights_version: str, left: int | None) -> GuidedRetries | None:
    """The loop's step: retries for all-fail groups (``config.guided_retries``), within the rollout
    budget ``left``; None when none were tried. The caller adds ``groups`` to the update (failed group +
    retries), ``retries`` (purpose "guided") to the generation's rollouts and ``metrics()`` to its metrics."""
    cfg = ctx.config
    if not cfg.guided_retries or not ctx.learn_weights:
        return None
    max_groups = cfg.guided_max_groups if left is None else min(cfg.guided_max_groups, left // cfg.guided_samples)
    if max_groups < 1:
        return None
    lessons = [ln for ln in prompt.components.get("lessons", "").splitlines() if ln.strip()]
    return guided_retries(ctx.env, ctx.policy, ctx.verifier, prompt, groups, ctx.tasks_by_id,
                          list(cfg.guided_retries), lessons, cfg.guided_samples, seed, weights_version, max_groups)


def _rehash(env, task: Task) -> dict:
    """An environment with its own anchor (repo-fix: the working copy's content) keeps it for the
    unguided retries too; others re-hash the unguided conversation."""
    state_hash = getattr(env, "state_hash", None)
    return {} if state_hash is None else {"rehash": lambda conv: state_hash(task, conv)}
