"""One generation of the loop, top to bottom: select, roll out, verify, update weights,
reflect, evaluate proposals, accept, evaluate held-out. Committing is the caller's
job (see ``evolve.loop.runner``), so replay can run the very same function.

Departures from GEPA (Agrawal et al. 2025) and FST, on purpose:
- GEPA samples the parent to mutate from the Pareto front each iteration. Here the
  parent is the current best prompt, because its rollouts are also the ones the
  weights train on: one set of rollouts feeds both levers.
- Proposals are evaluated *after* the weight update, on the new weights, and the
  parent is re-evaluated there with the same seed (common random numbers), so the
  minibatch gate and the validation check compare like with like. Validation scores
  of older pool members were measured on older weights and are not refreshed.
- FST interleaves a GEPA round every T RL steps on separate rollouts; here every
  generation reflects on the same rollouts, routed by group variance (see routing.py),
  and the winning prompt's evaluation rollouts are on-policy for the next update,
  so they are reused as training data.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from evolve.loop.config import GenerationSeeds, LoopConfig
from evolve.loop.rollouts import PENDING_WEIGHTS, heldout_metrics, roll_out, task_scores, verify
from evolve.loop.routing import Routing, group_by_task, route
from evolve.loop.state import LoopState, rollout_from_dict, rollout_to_dict
from evolve.prompt.candidate import Candidate
from evolve.rollout import Rollout
from evolve.verification.types import Task


@dataclass
class LoopContext:
    """What a generation works with; built once per process by the runner."""

    config: LoopConfig
    policy: object  # evolve.policy Policy
    verifier: object  # evolve.verification.Verifier
    evolver: object  # evolve.prompt.PromptEvolver
    train_tasks: list[Task]
    heldout_tasks: list[Task]
    val_tasks: list[Task]
    tasks_by_id: dict[str, Task]
    learn_weights: bool
    learn_prompt: bool


@dataclass
class Outcome:
    """Everything a generation produced, ready to commit (or to compare, in replay)."""

    index: int
    seeds: GenerationSeeds
    prompt: Candidate
    rollouts: list[Rollout] = field(default_factory=list)
    proposals: list[dict] = field(default_factory=list)  # {"proposal", "accepted", scores...}
    update_stats: dict | None = None
    metrics: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    loop_state: LoopState | None = None


class Timer:
    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - t0


def run_generation(ctx: LoopContext, state: LoopState, index: int, seeds: GenerationSeeds,
                   parent_weights: str, parent_heldout: dict | None, progress=None) -> Outcome:
    cfg, timer = ctx.config, Timer()
    random_seed = seeds.reward if cfg.reward == "random" else None
    prompt = ctx.evolver.current()
    out = Outcome(index=index, seeds=seeds, prompt=prompt)

    with timer.phase("select"):  # 1. select tasks
        picks = state.sampler.take(len(ctx.train_tasks), cfg.tasks_per_generation)
        tasks = [ctx.train_tasks[i] for i in picks]
    _tick(progress, "rollout")
    with timer.phase("rollout"):  # 2. roll out G samples per task
        train = roll_out(ctx.policy, prompt, tasks, cfg.samples_per_task, seeds.sample, "train", parent_weights)
    with timer.phase("verify"):  # 3. verify
        verify(ctx.verifier, ctx.tasks_by_id, train, random_seed)
    groups = group_by_task(train)
    routing = route(groups, cfg.recurring_failure_min_groups)
    out.rollouts += train

    _tick(progress, "update")
    if ctx.learn_weights:  # 4. GRPO-family update (+ on-policy rollouts carried from the last generation)
        with timer.phase("update"):
            carried = group_by_task([rollout_from_dict(d) for d in state.carried])
            out.update_stats = ctx.policy.update(groups + carried).to_dict()

    _tick(progress, "reflect")
    reused: list[Rollout] = []
    if ctx.learn_prompt:  # 5-7. reflect on the routed failures, evaluate proposals, accept
        with timer.phase("reflect"):
            rng = random.Random(seeds.reflect)
            proposals = ctx.evolver.propose(prompt, routing.reflection_rollouts + routing.contrast_rollouts, rng)
        with timer.phase("proposal_eval"):
            reused = _evaluate_proposals(ctx, prompt, proposals, routing, tasks, seeds, random_seed, out)

    _tick(progress, "heldout")
    with timer.phase("heldout"):  # 8. held-out evaluation (and the split between the levers)
        _evaluate_heldout(ctx, prompt, seeds, parent_heldout, out)

    learning = [r for r in out.rollouts if r.purpose != "heldout"]
    state.rollouts_spent += len(learning)
    if cfg.reuse_candidate_rollouts == "all":
        reused = [r for r in out.rollouts if r.purpose == "candidate"]
    state.carried = [rollout_to_dict(r) for r in reused] if cfg.reuse_candidate_rollouts != "none" else []
    state.heldout_history.append(out.metrics["heldout"]["pass@1"])
    out.loop_state = state
    out.metrics.update(_train_metrics(train, routing, out, state))
    out.metrics["levers"] = {"weights": ctx.learn_weights, "prompt": ctx.learn_prompt}
    out.timings = timer.spent
    return out


def _tick(progress, phase: str) -> None:
    if progress is not None:
        progress(phase)


def _minibatch(routing: Routing, tasks: list[Task], size: int) -> list[Task]:
    """Reflected-on tasks first (those are what a proposal claims to fix), then the rest of the batch."""
    by_id = {t.task_id: t for t in tasks}
    order = list(dict.fromkeys([r.task_id for r in routing.reflection_rollouts] + [t.task_id for t in tasks]))
    return [by_id[t] for t in order[:size]]


def _evaluate_proposals(ctx, parent: Candidate, proposals, routing, tasks, seeds, random_seed, out) -> list:
    """Minibatch gate, then validation; returns the new current prompt's on-policy rollouts."""
    cfg = ctx.config
    if not proposals:
        return []
    mb_tasks = _minibatch(routing, tasks, cfg.minibatch_tasks)

    def evaluate(cand: Candidate, task_list: list[Task], n: int, seed: int) -> list[Rollout]:
        rolls = roll_out(ctx.policy, cand, task_list, n, seed, "candidate", PENDING_WEIGHTS)
        verify(ctx.verifier, ctx.tasks_by_id, rolls, random_seed)
        out.rollouts.extend(rolls)
        return rolls

    # Common random numbers: parent and proposals are sampled with the same seed on the same weights.
    parent_mb = evaluate(parent, mb_tasks, cfg.minibatch_samples, seeds.reflect)
    parent_scores = task_scores(parent_mb)
    parent_val: list[Rollout] | None = None
    on_policy: dict[str, list[Rollout]] = {parent.id: parent_mb}
    for proposal in proposals:
        rolls = evaluate(proposal.candidate, mb_tasks, cfg.minibatch_samples, seeds.reflect)
        scores = task_scores(rolls)
        record = {"proposal": proposal, "minibatch": scores, "parent_minibatch": parent_scores, "accepted": False}
        if ctx.evolver.accept(proposal, scores, parent_scores, metric_calls=len(rolls)):
            if parent_val is None:
                parent_val = evaluate(parent, ctx.val_tasks, cfg.val_samples, seeds.reflect + 1)
                ctx.evolver.observe_val(parent, task_scores(parent_val), metric_calls=len(parent_val))
                bar = float(np.mean(list(task_scores(parent_val).values()))) - cfg.noninferior_tolerance
                on_policy[parent.id] = parent_mb + parent_val
            cand_val = evaluate(proposal.candidate, ctx.val_tasks, cfg.val_samples, seeds.reflect + 1)
            ctx.evolver.observe_val(proposal.candidate, task_scores(cand_val), metric_calls=len(cand_val))
            val_mean = float(np.mean(list(task_scores(cand_val).values())))
            if cfg.promotion == "noninferior" and val_mean >= bar:
                ctx.evolver.promote(proposal.candidate)  # the best non-inferior proposal so far wins
                bar = val_mean
            on_policy[proposal.candidate.id] = rolls + cand_val
            record.update(accepted=True, val=task_scores(cand_val), parent_val=task_scores(parent_val))
        out.proposals.append(record)
    return on_policy.get(ctx.evolver.current().id, [])


def _evaluate_heldout(ctx, old_prompt: Candidate, seeds, parent_heldout, out: Outcome) -> None:
    cfg = ctx.config
    new_prompt = ctx.evolver.current()

    def evaluate(cand: Candidate) -> dict:
        rolls = roll_out(ctx.policy, cand, ctx.heldout_tasks, cfg.heldout_samples, seeds.heldout, "heldout",
                         PENDING_WEIGHTS)
        verify(ctx.verifier, ctx.tasks_by_id, rolls, None)
        out.rollouts.extend(rolls)
        return heldout_metrics(rolls, cfg.heldout_ks)

    final = evaluate(new_prompt)
    out.metrics["heldout"] = final
    out.metrics["prompt_changed"] = new_prompt.id != old_prompt.id
    if parent_heldout is None:
        return
    # Split the gain: (old prompt, new weights) isolates the weight update's part.
    if new_prompt.id != old_prompt.id and cfg.attribution:
        mid = evaluate(old_prompt) if ctx.learn_weights else parent_heldout
    else:
        mid = final
    out.metrics["attribution"] = {
        "delta_weights": mid["pass@1"] - parent_heldout["pass@1"],
        "delta_prompt": final["pass@1"] - mid["pass@1"],
        "classes": _class_attribution(parent_heldout["failure_classes"], mid["failure_classes"],
                                      final["failure_classes"]),
    }


def _class_attribution(before: dict, mid: dict, after: dict) -> dict:
    """Per failure class: how many held-out failures each lever removed (negative = added)."""
    out = {}
    for c in sorted(set(before) | set(mid) | set(after)):
        b, m, a = before.get(c, 0), mid.get(c, 0), after.get(c, 0)
        out[c] = {"before": b, "after": a, "removed_by_weights": b - m, "removed_by_prompt": m - a}
    return out


def _train_metrics(train: list[Rollout], routing: Routing, out: Outcome, state: LoopState) -> dict:
    summary = routing.summary()
    return {
        "train_reward": float(np.mean([r.reward for r in train])) if train else 0.0,
        "train_pass_rate": float(np.mean([r.passed for r in train])) if train else 0.0,
        "routing": summary,
        "zero_variance_fraction": summary["zero_variance_fraction"],
        "update": out.update_stats,
        "proposals": len(out.proposals),
        "accepted": sum(1 for p in out.proposals if p["accepted"]),
        "rollouts_spent": state.rollouts_spent,
        "reused_rollouts": len(state.carried),
    }
