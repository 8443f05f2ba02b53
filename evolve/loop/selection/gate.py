"""GEPA's own rule (``[loop.selection] type = "gate"``), kept for comparison with the anchor.

Departures from GEPA (Agrawal et al. 2025), on purpose:
- GEPA samples the parent to mutate from the Pareto front each iteration. Here the parent is the
  current prompt, because its rollouts are also the ones the weights train on.
- Proposals are evaluated *after* the weight update, on the new weights, and the parent is
  re-evaluated there with the same seed (common random numbers), so the minibatch gate and the
  validation check compare like with like. Validation scores of older pool members were measured
  on older weights and are not refreshed.
- GEPA promotes the best mean validation score, so one extra success out of 64 samples switches
  prompts; here a proposal replaces its parent only when the paired sign-flip test of its per-task
  validation differences rejects at ``gate_alpha`` (evolve/prompt/gate_rule.py; never on a tie) and
  its validation mean beats this generation's best so far.
- The winning prompt's evaluation rollouts are on-policy for the next update, so they are carried
  into it as training data.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evolve.loop.config import GenerationSeeds
from evolve.loop.context import LoopContext, ProposalRecord, Timer, budget_left
from evolve.loop.rollouts import PENDING_WEIGHTS, roll_out, task_scores, verify
from evolve.loop.routing import Routing
from evolve.loop.selection.base import Arm, Judged, Judgement
from evolve.loop.selection.configs import GateSelection
from evolve.loop.state import LoopState
from evolve.metrics import GateRecord, UpdateRecord
from evolve.prompt.candidate import Candidate
from evolve.prompt.evolver import Proposal
from evolve.prompt.gate_rule import gate_passes
from evolve.rollout import Rollout
from evolve.verification.types import Task


@dataclass(frozen=True)
class Gate:
    sel: GateSelection
    type: str = "gate"

    def arms(self, ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, group_size: int) -> list[Arm]:
        return [Arm(ctx.evolver.current(), group_size)]

    def update_record(self, carried_groups: int, distill_groups: int) -> UpdateRecord:
        return {"carried_groups": carried_groups}

    def judge(self, ctx: LoopContext, state: LoopState, judged: Judged, timer: Timer) -> Judgement:
        """Reflect on the routed failures, gate each proposal (minibatch, then validation); carries the
        current prompt's evaluation rollouts (on-policy for the next update)."""
        parent, routing, verdict = judged.arms[0].candidate, judged.routing, Judgement()
        with timer.phase("reflect"):
            proposals = ctx.evolver.propose(parent, routing.reflection_rollouts + routing.contrast_rollouts,
                                            random.Random(judged.seeds.reflect), generation=judged.index)
        with timer.phase("proposal_eval"):
            verdict.carry = self._evaluate(ctx, state, parent, proposals, judged, verdict)
        verdict.metrics["gate"] = [gate_record(ctx, p) for p in verdict.proposals]
        return verdict

    def _evaluate(self, ctx: LoopContext, state: LoopState, parent: Candidate, proposals: list[Proposal],
                  judged: Judged, verdict: Judgement) -> list[Rollout]:
        """Minibatch gate, then validation. Every evaluation is checked against the rollout budget
        first; one that does not fit is not run and its proposal is recorded as rejected ("budget")."""
        cfg, sel, seeds = ctx.config, self.sel, judged.seeds
        if not proposals:
            return []
        mb_tasks = _minibatch(judged.routing, judged.tasks, sel.minibatch_tasks)
        random_seed = seeds.reward if cfg.reward == "random" else None

        def evaluate(cand: Candidate, task_list: list[Task], n: int, seed: int) -> list[Rollout]:
            left = budget_left(cfg, state, [*judged.spent, *verdict.rollouts])
            if left is not None and len(task_list) * n > left:
                raise _OverBudget
            rolls = roll_out(ctx, cand, task_list, n, seed, "candidate", PENDING_WEIGHTS)
            verify(ctx.verifier, ctx.tasks_by_id, rolls, random_seed)
            verdict.rollouts.extend(rolls)
            return rolls

        try:  # common random numbers: parent and proposals sampled with one seed on the same weights
            parent_mb = evaluate(parent, mb_tasks, sel.minibatch_samples, seeds.reflect)
        except _OverBudget:
            verdict.proposals += [_over_budget(p) for p in proposals]
            return []
        gate_parent = GateParent(parent, task_scores(parent_mb, cfg.selection_signal))
        on_policy: dict[str, list[Rollout]] = {parent.id: parent_mb}
        for proposal in proposals:
            try:
                gate_one(ctx, sel, proposal, gate_parent, mb_tasks, on_policy, evaluate, seeds, verdict.proposals)
            except _OverBudget:
                if not verdict.proposals or verdict.proposals[-1]["proposal"] is not proposal:
                    verdict.proposals.append(_over_budget(proposal))
                else:
                    verdict.proposals[-1]["meta"] = {"skipped": "budget (validation)"}
        return on_policy.get(ctx.evolver.current().id, [])


class _OverBudget(Exception):
    """An evaluation that would spend more learning rollouts than the budget has left."""


def _over_budget(proposal: Proposal) -> ProposalRecord:
    return {"proposal": proposal, "minibatch": None, "parent_minibatch": None, "accepted": False,
            "meta": {"skipped": "budget"}}


def _minibatch(routing: Routing, tasks: list[Task], size: int) -> list[Task]:
    """Reflected-on tasks first (those are what a proposal claims to fix), then the rest of the batch."""
    by_id = {t.task_id: t for t in tasks}
    order = list(dict.fromkeys([r.task_id for r in routing.reflection_rollouts] + [t.task_id for t in tasks]))
    return [by_id[t] for t in order[:size]]


@dataclass
class GateParent:
    """The parent's evaluations in one generation's gate (validation measured lazily, once)."""

    candidate: Candidate
    scores: dict[str, float]
    val: list[Rollout] | None = None
    bar: float = 0.0


Evaluate = Callable[[Candidate, list[Task], int, int], list[Rollout]]  # (candidate, tasks, n, seed) -> verified


def gate_one(ctx: LoopContext, sel: GateSelection, proposal: Proposal, parent: GateParent, mb_tasks: list[Task],
             on_policy: dict[str, list[Rollout]], evaluate: Evaluate, seeds: GenerationSeeds,
             records: list[ProposalRecord]) -> None:
    """One proposal: minibatch gate, then (if it passes) validation and the promotion rule; its record is
    appended to ``records`` first, so a budget stop during validation finds it there."""
    cfg, ev = ctx.config, ctx.evolver
    rolls = evaluate(proposal.candidate, mb_tasks, sel.minibatch_samples, seeds.reflect)
    scores = task_scores(rolls, cfg.selection_signal)
    record: ProposalRecord = {"proposal": proposal, "minibatch": scores, "parent_minibatch": parent.scores,
                              "accepted": False}
    records.append(record)
    if not ev.accept(proposal, scores, parent.scores, metric_calls=len(rolls)):
        return
    if parent.val is None:
        parent.val = evaluate(parent.candidate, ctx.val_tasks, sel.val_samples, seeds.reflect + 1)
        parent_scores = task_scores(parent.val, cfg.selection_signal)
        ev.observe_val(parent.candidate, parent_scores, metric_calls=len(parent.val))
        parent.bar = float(np.mean(list(parent_scores.values())))
        on_policy[parent.candidate.id] = on_policy[parent.candidate.id] + parent.val
    if ev.incumbent is None:  # pin the parent: a validated pool member never switches the prompt by itself
        ev.promote(parent.candidate)
    cand_val = evaluate(proposal.candidate, ctx.val_tasks, sel.val_samples, seeds.reflect + 1)
    val_scores = task_scores(cand_val, cfg.selection_signal)
    ev.observe_val(proposal.candidate, val_scores, metric_calls=len(cand_val))
    val_mean = float(np.mean(list(val_scores.values())))
    parent_val = task_scores(parent.val, cfg.selection_signal)
    beats, evidence = gate_passes(val_scores, parent_val, sel.gate_alpha, sel.gate_margin)
    better = val_mean > parent.bar
    if beats and better:
        ev.promote(proposal.candidate)
        parent.bar = val_mean
    on_policy[proposal.candidate.id] = rolls + cand_val
    record.update({"accepted": True, "val": val_scores, "parent_val": parent_val,
                   "gate": {**evidence, "promoted": beats and better}})


def gate_record(ctx: LoopContext, p: ProposalRecord) -> GateRecord:
    """One proposal's gate evidence for the status line and the lineage: minibatch means (parent,
    proposal), validation means when it got that far, the decision."""
    prop = p["proposal"]
    added = ctx.evolver.added_lessons(prop.candidate, prop.parents) if prop.kind != "merge" and prop.parents else []

    def avg(d: dict[str, float] | None) -> float | None:
        return round(float(np.mean(list(d.values()))), 3) if d else None

    return {"id": prop.candidate.id, "kind": prop.kind, "added": " / ".join(added)[:120],
            "minibatch": [avg(p.get("parent_minibatch")), avg(p.get("minibatch"))],
            "val": [avg(p.get("parent_val")), avg(p.get("val"))], "accepted": p["accepted"],
            "test": p.get("gate"), "skipped": (p.get("meta") or {}).get("skipped")}
