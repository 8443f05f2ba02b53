"""Prompt-only evolution with frozen weights: the stepwise evolver driven end to end.

The coupled loop (evolve.loop) drives the same steps inside each generation; this driver is
for prompt-only use (a frozen or API model) and for measuring what prompt evolution alone
gains. Per step: roll out the current prompt on a batch of train tasks, reflect on the
failures, gate each proposal on a minibatch (common random numbers: same seed for parent
and proposal), validate accepted ones, and keep the best by mean validation score.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evolve.prompt.adapter import roll_out_candidate
from evolve.prompt.candidate import Candidate
from evolve.prompt.evolver import PromptEvolver
from evolve.rollout import Rollout
from evolve.verification.types import Task


@dataclass(frozen=True)
class DriverConfig:
    """How much work one prompt-only run does."""

    steps: int = 4  # reflection steps
    tasks_per_step: int = 8  # train tasks rolled out per step (reflected on)
    samples_per_task: int = 4  # samples per task (smooths noisy scores)
    minibatch_tasks: int = 8  # tasks a proposal is gated on
    seed: int = 0


@dataclass
class DriverResult:
    best: Candidate
    steps: list[dict] = field(default_factory=list)  # per step: parent, proposals with scores, accepted


def task_scores(groups: list[list[Rollout]]) -> dict[str, float]:
    return {g[0].task_id: sum(r.reward for r in g) / len(g) for g in groups if g}


def evolve_prompt_only(ev: PromptEvolver, policy: Any, verifier: Any, train: list[Task], val: list[Task],
                       cfg: DriverConfig, rollout_sink: Callable[[list[Rollout]], None] | None = None,
                       say: Callable[[str], None] = lambda s: None) -> DriverResult:
    rng = random.Random(cfg.seed)
    sink = rollout_sink or (lambda rs: None)

    def run(cand: Candidate, tasks: list[Task], seed: int, purpose: str) -> list[list[Rollout]]:
        groups = roll_out_candidate(policy, verifier, cand, tasks, cfg.samples_per_task, seed, purpose=purpose)
        sink([r for g in groups for r in g])
        return groups

    if ev.val_scores(ev.current()) is None:
        seed_val = task_scores(run(ev.current(), val, cfg.seed + 7, "candidate"))
        ev.observe_val(ev.current(), seed_val)
        say(f"seed val {sum(seed_val.values()) / max(1, len(seed_val)):.3f}")
    out = DriverResult(ev.current())
    for step in range(cfg.steps):
        if ev.exhausted:
            break
        parent = ev.select_parent(rng)
        batch = rng.sample(train, min(cfg.tasks_per_step, len(train)))
        seed = cfg.seed * 1000 + step
        groups = run(parent, batch, seed, "train")
        flat = [r for g in groups for r in g]
        record = {"step": step, "parent": parent.id, "train_pass": sum(r.passed for r in flat) / max(1, len(flat)),
                  "proposals": []}
        proposals = ev.propose(parent, flat, rng)
        mb = batch[: cfg.minibatch_tasks]
        parent_mb = task_scores(groups[: len(mb)])
        for p in proposals:
            scores = task_scores(run(p.candidate, mb, seed, "candidate"))
            ok = ev.accept(p, scores, parent_mb, metric_calls=len(mb) * cfg.samples_per_task)
            entry = {"id": p.candidate.id, "kind": p.kind, "rationale": p.rationale, "minibatch": sum(scores.values()),
                     "parent_minibatch": sum(parent_mb.values()), "accepted": ok}
            if ok:
                vs = task_scores(run(p.candidate, val, cfg.seed + 7, "candidate"))
                ev.observe_val(p.candidate, vs, metric_calls=len(vs) * cfg.samples_per_task)
                entry["val"] = sum(vs.values()) / len(vs)
            record["proposals"].append(entry)
            val_note = f", val {entry['val']:.3f}" if ok else ""
            say(f"step {step}: {p.kind} {'accepted' if ok else 'rejected'} "
                f"(minibatch {entry['parent_minibatch']:.2f} -> {entry['minibatch']:.2f}{val_note}) {p.rationale[-80:]}")
        out.steps.append(record)
    out.best = ev.current()
    return out
