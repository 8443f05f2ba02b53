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
from typing import TYPE_CHECKING, Protocol

import numpy as np

from evolve.env.base import Environment, Generator, Verifying
from evolve.errors import EvolveError
from evolve.loop.config import GenerationSeeds, LoopConfig
from evolve.loop.distill import distill_groups
from evolve.loop.guided_retry import guided_update_groups
from evolve.loop.in_group import run_in_group
from evolve.loop.rollouts import PENDING_WEIGHTS, heldout_metrics, roll_out, task_scores, verify
from evolve.loop.routing import Routing, group_by_task, route, turn_level
from evolve.loop.state import LoopState, rollout_from_dict, rollout_to_dict
from evolve.prompt.candidate import Candidate
from evolve.prompt.evolver import PromptEvolver
from evolve.prompt.gate_rule import gate_passes
from evolve.rollout import Rollout
from evolve.verification.types import Task

if TYPE_CHECKING:
    from evolve.policy.stats import UpdateStats


@dataclass
class LoopContext:
    """What a generation works with; built once per process by the runner."""

    config: LoopConfig
    policy: LoopPolicy  # evolve.policy Policy
    verifier: Verifying  # evolve.verification.Verifier (wrapped by the environment)
    evolver: PromptEvolver
    train_tasks: list[Task]
    heldout_tasks: list[Task]
    val_tasks: list[Task]
    tasks_by_id: dict[str, Task]
    learn_weights: bool
    learn_prompt: bool
    all_heldout_tasks: list[Task] = field(default_factory=list)  # for the full held-out figure
    env: Environment | None = None  # who owns the episode; None = the single-turn default rendering

    def __post_init__(self) -> None:
        if self.env is None:
            from evolve.env.suites import SuiteEnv

            self.env = SuiteEnv("tasks", lambda: {"train": self.train_tasks, "heldout": self.heldout_tasks})


class LoopPolicy(Generator, Protocol):
    """What the loop needs of a policy (``evolve.policy.Policy``): sampling plus the weights' side."""

    can_update: bool
    tokenizer: object

    def update(self, groups: list[list[Rollout]]) -> UpdateStats: ...

    def weights_hash(self) -> str: ...

    def save(self, directory) -> object: ...


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
    parent_weights: str = PENDING_WEIGHTS
    budget_left: int | None = None  # learning rollouts left when the generation started
    routing: Routing = field(default_factory=Routing)
    update_groups: list = field(default_factory=list)  # exactly what the weight update was given


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
    prompt = ctx.evolver.current()
    out = Outcome(index=index, seeds=seeds, prompt=prompt, parent_weights=parent_weights)
    out.budget_left = None if cfg.max_rollouts is None else cfg.max_rollouts - state.rollouts_spent

    with timer.phase("select"):  # 1. select tasks (fewer, or a smaller group, at the end of the budget)
        n_tasks, group_size = plan_batch(cfg.tasks_per_generation, cfg.samples_per_task, out.budget_left)
        picks = state.sampler.take(len(ctx.train_tasks), n_tasks)
        tasks = [ctx.train_tasks[i] for i in picks]
    if cfg.selection == "in_group" and ctx.learn_prompt:  # 2-7 with the prompts inside the groups
        run_in_group(ctx, state, index, seeds, tasks, group_size, out, timer, progress, _tick)
    else:
        _run_gate(ctx, state, seeds, tasks, group_size, out, timer, progress)
        out.metrics["gate"] = [_gate_record(ctx, p) for p in out.proposals]

    _tick(progress, "heldout")
    with timer.phase("heldout"):  # 8. held-out evaluation (and the split between the levers)
        _evaluate_heldout(ctx, prompt, seeds, parent_heldout, out)
    if "guided" in out.metrics:  # the leakage audit's unguided figure: held-out is never guided
        out.metrics["guided"]["heldout_pass1_unguided"] = out.metrics["heldout"]["pass@1"]

    learning = [r for r in out.rollouts if r.purpose != "heldout"]
    state.rollouts_spent += len(learning)
    if cfg.max_rollouts is not None and state.rollouts_spent > cfg.max_rollouts:  # a bug, never a policy
        raise EvolveError(f"budget overshoot: {state.rollouts_spent} > max_rollouts {cfg.max_rollouts}")
    _final_heldout(ctx, seeds, index, state, out, timer)
    state.heldout_history.append(out.metrics["heldout"]["pass@1"])
    out.loop_state = state
    out.metrics.update(_train_metrics([r for r in out.rollouts if r.purpose == "train"], out.routing, out, state))
    out.metrics["levers"] = {"weights": ctx.learn_weights, "prompt": ctx.learn_prompt}
    out.metrics["selection"] = cfg.selection if ctx.learn_prompt else None
    out.timings = timer.spent
    return out


def plan_batch(tasks: int, group: int, left: int | None) -> tuple[int, int]:
    """(tasks, samples per task) of a generation's training batch that fit in ``left`` rollouts."""
    if left is None or left >= tasks * group:
        return tasks, group
    if left >= group:
        return left // group, group
    return (1, left) if left > 0 else (0, group)


def budget_left(cfg: LoopConfig, state: LoopState, out: Outcome) -> int | None:
    """Learning rollouts this generation may still spend (None = no budget)."""
    if cfg.max_rollouts is None:
        return None
    return cfg.max_rollouts - state.rollouts_spent - sum(1 for r in out.rollouts if r.purpose != "heldout")


def _run_gate(ctx, state, seeds, tasks, group_size, out, timer, progress) -> None:
    """The separate minibatch-then-validation path (``selection = "gate"``), and the weights-only loop."""
    cfg = ctx.config
    random_seed = seeds.reward if cfg.reward == "random" else None
    prompt = out.prompt
    _tick(progress, "rollout")
    with timer.phase("rollout"):  # 2. roll out G samples per task
        train = roll_out(ctx, prompt, tasks, group_size, seeds.sample, "train", out.parent_weights)
    with timer.phase("verify"):  # 3. verify
        verify(ctx.verifier, ctx.tasks_by_id, train, random_seed)
    routing = route(group_by_task(train), cfg.recurring_failure_min_groups, cfg.all_fail_groups == "both",
                    turn_level=turn_level(ctx.policy))
    out.routing = routing
    out.rollouts += train

    _tick(progress, "update")
    if ctx.learn_weights:  # 4. GRPO-family update on exactly the routed groups (+ routed carried ones)
        with timer.phase("update"):
            carried = route(group_by_task([rollout_from_dict(d) for d in state.carried]),
                            cfg.recurring_failure_min_groups, cfg.all_fail_groups == "both", turn_level(ctx.policy))
            extra = distill_groups(ctx, carried.weight_groups) if cfg.distill == "seed" else []
            guided = guided_update_groups(ctx, prompt, group_by_task(train), (seeds.sample * 31 + 7) % (2**31 - 1),
                                          out.parent_weights, budget_left(cfg, state, out), out)
            retried = {g[0].task_id for g in guided}  # a failed group routed to the weights too is replaced
            weight = [g for g in routing.weight_groups if g[0].task_id not in retried]
            out.update_groups = weight + carried.weight_groups + extra + guided
            out.update_stats = ctx.policy.update(out.update_groups).to_dict()
            out.update_stats["carried_groups"] = len(carried.weight_groups)

    _tick(progress, "reflect")
    reused: list[Rollout] = []
    if ctx.learn_prompt:  # 5-7. reflect on the routed failures, evaluate proposals, accept
        with timer.phase("reflect"):
            rng = random.Random(seeds.reflect)
            proposals = ctx.evolver.propose(prompt, routing.reflection_rollouts + routing.contrast_rollouts, rng)
        with timer.phase("proposal_eval"):
            reused = _evaluate_proposals(ctx, state, prompt, proposals, routing, tasks, seeds, random_seed, out)
    if cfg.reuse_candidate_rollouts == "all":
        reused = [r for r in out.rollouts if r.purpose == "candidate"]
    state.carried = [rollout_to_dict(r) for r in reused] if cfg.reuse_candidate_rollouts != "none" else []


def _tick(progress, phase: str) -> None:
    if progress is not None:
        progress(phase)


def _minibatch(routing: Routing, tasks: list[Task], size: int) -> list[Task]:
    """Reflected-on tasks first (those are what a proposal claims to fix), then the rest of the batch."""
    by_id = {t.task_id: t for t in tasks}
    order = list(dict.fromkeys([r.task_id for r in routing.reflection_rollouts] + [t.task_id for t in tasks]))
    return [by_id[t] for t in order[:size]]


def _evaluate_proposals(ctx, state, parent: Candidate, proposals, routing, tasks, seeds, random_seed, out) -> list:
    """Minibatch gate, then validation; returns the new current prompt's on-policy rollouts.

    Every evaluation is checked against the rollout budget first; one that does not fit is not
    run and its proposal is recorded as rejected ("budget")."""
    cfg = ctx.config
    if not proposals:
        return []
    mb_tasks = _minibatch(routing, tasks, cfg.minibatch_tasks)

    def evaluate(cand: Candidate, task_list: list[Task], n: int, seed: int) -> list[Rollout]:
        left = budget_left(cfg, state, out)
        if left is not None and len(task_list) * n > left:
            raise _OverBudget
        rolls = roll_out(ctx, cand, task_list, n, seed, "candidate", PENDING_WEIGHTS)
        verify(ctx.verifier, ctx.tasks_by_id, rolls, random_seed)
        out.rollouts.extend(rolls)
        return rolls

    # Common random numbers: parent and proposals are sampled with the same seed on the same weights.
    try:
        parent_mb = evaluate(parent, mb_tasks, cfg.minibatch_samples, seeds.reflect)
    except _OverBudget:
        out.proposals += [_over_budget(p) for p in proposals]
        return []
    gate_parent = _Parent(parent, task_scores(parent_mb, cfg.selection_signal))
    on_policy: dict[str, list[Rollout]] = {parent.id: parent_mb}
    for proposal in proposals:
        try:
            _gate_one(ctx, proposal, gate_parent, mb_tasks, on_policy, evaluate, seeds, out)
        except _OverBudget:
            if not out.proposals or out.proposals[-1]["proposal"] is not proposal:
                out.proposals.append(_over_budget(proposal))
            else:
                out.proposals[-1]["meta"] = {"skipped": "budget (validation)"}
    return on_policy.get(ctx.evolver.current().id, [])


class _OverBudget(Exception):
    """An evaluation that would spend more learning rollouts than the budget has left."""


def _over_budget(proposal) -> dict:
    return {"proposal": proposal, "minibatch": None, "parent_minibatch": None, "accepted": False,
            "meta": {"skipped": "budget"}}


@dataclass
class _Parent:
    """The parent's evaluations in one generation's gate (validation measured lazily, once)."""

    candidate: Candidate
    scores: dict
    val: list | None = None
    bar: float = 0.0


def _gate_one(ctx, proposal, parent: _Parent, mb_tasks, on_policy, evaluate, seeds, out) -> None:
    """One proposal: minibatch gate, then (if it passes) validation and the promotion rule.

    The proposal replaces the parent only when it beats it on validation by ``gate_rule``
    (evolve/prompt/gate_rule.py; never on a tie), and under "best_val" only when its validation
    mean also beats this generation's best so far."""
    cfg, ev = ctx.config, ctx.evolver
    rolls = evaluate(proposal.candidate, mb_tasks, cfg.minibatch_samples, seeds.reflect)
    scores = task_scores(rolls, cfg.selection_signal)
    record = {"proposal": proposal, "minibatch": scores, "parent_minibatch": parent.scores, "accepted": False}
    out.proposals.append(record)
    if not ev.accept(proposal, scores, parent.scores, metric_calls=len(rolls)):
        return
    if parent.val is None:
        parent.val = evaluate(parent.candidate, ctx.val_tasks, cfg.val_samples, seeds.reflect + 1)
        parent_scores = task_scores(parent.val, cfg.selection_signal)
        ev.observe_val(parent.candidate, parent_scores, metric_calls=len(parent.val))
        parent.bar = float(np.mean(list(parent_scores.values())))
        if cfg.promotion == "noninferior":
            parent.bar -= cfg.noninferior_tolerance
        on_policy[parent.candidate.id] = on_policy[parent.candidate.id] + parent.val
    if ev.incumbent is None:  # pin the parent: a validated pool member never switches the prompt by itself
        ev.promote(parent.candidate)
    cand_val = evaluate(proposal.candidate, ctx.val_tasks, cfg.val_samples, seeds.reflect + 1)
    val_scores = task_scores(cand_val, cfg.selection_signal)
    ev.observe_val(proposal.candidate, val_scores, metric_calls=len(cand_val))
    val_mean = float(np.mean(list(val_scores.values())))
    parent_val = task_scores(parent.val, cfg.selection_signal)
    beats, evidence = gate_passes(val_scores, parent_val, cfg.gate_rule, cfg.gate_alpha, cfg.gate_margin)
    better = val_mean >= parent.bar if cfg.promotion == "noninferior" else val_mean > parent.bar
    if beats and better:
        ev.promote(proposal.candidate)
        parent.bar = val_mean
    on_policy[proposal.candidate.id] = rolls + cand_val
    record.update(accepted=True, val=val_scores, parent_val=parent_val,
                  gate={**evidence, "promoted": beats and better})


def _gate_record(ctx, p: dict) -> dict:
    """One proposal's gate evidence for the status line and the lineage: minibatch means (parent,
    proposal), validation means when it got that far, the decision."""
    prop = p["proposal"]
    added = ctx.evolver._added_lessons(prop) if prop.kind != "merge" and prop.parents else []

    def avg(d):
        return round(float(np.mean(list(d.values()))), 3) if d else None

    return {"id": prop.candidate.id, "kind": prop.kind, "added": " / ".join(added)[:120],
            "minibatch": [avg(p.get("parent_minibatch")), avg(p.get("minibatch"))],
            "val": [avg(p.get("parent_val")), avg(p.get("val"))], "accepted": p["accepted"],
            "test": p.get("gate"), "skipped": (p.get("meta") or {}).get("skipped")}


def _evaluate_heldout(ctx, old_prompt: Candidate, seeds, parent_heldout, out: Outcome) -> None:
    cfg = ctx.config
    new_prompt = ctx.evolver.current()

    def evaluate(cand: Candidate) -> dict:
        rolls = roll_out(ctx, cand, ctx.heldout_tasks, cfg.heldout_samples, seeds.heldout, "heldout",
                         PENDING_WEIGHTS)
        verify(ctx.verifier, ctx.tasks_by_id, rolls, None)
        out.rollouts.extend(rolls)
        return heldout_metrics(rolls, cfg.heldout_ks)

    final = evaluate(new_prompt)
    out.metrics["heldout"] = final
    out.metrics["prompt_changed"] = new_prompt.id != old_prompt.id
    seed = ctx.evolver.seed
    if cfg.heldout_seed_prompt:  # "does the model still need the prompt?"
        out.metrics["heldout_seed"] = final if seed.id == new_prompt.id else evaluate(seed)
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


def _final_heldout(ctx, seeds, index: int, state: LoopState, out: Outcome, timer: Timer) -> None:
    """At the last generation (budget spent or ``generations`` reached): the full held-out figure."""
    cfg = ctx.config
    spent = cfg.max_rollouts is not None and state.rollouts_spent >= cfg.max_rollouts
    if cfg.heldout_final_tasks is None or not (spent or index >= cfg.generations):
        return
    with timer.phase("heldout_full"):
        out.metrics["heldout_full"] = full_heldout(ctx, ctx.evolver.current(), seeds, out.rollouts)
        if cfg.heldout_seed_prompt and ctx.evolver.current().id != ctx.evolver.seed.id:
            out.metrics["heldout_full_seed"] = full_heldout(ctx, ctx.evolver.seed, seeds, out.rollouts)


def full_heldout(ctx, candidate: Candidate, seeds, sink: list) -> dict:
    """``heldout_final_tasks`` held-out tasks (0 = every one) x ``heldout_final_samples``, per-task passes kept."""
    cfg = ctx.config
    tasks = ctx.all_heldout_tasks or ctx.heldout_tasks
    if cfg.heldout_final_tasks:
        tasks = tasks[:cfg.heldout_final_tasks]
    n = cfg.heldout_final_samples
    rolls = roll_out(ctx, candidate, tasks, n, seeds.heldout, "heldout", PENDING_WEIGHTS)
    verify(ctx.verifier, ctx.tasks_by_id, rolls, None)
    sink.extend(rolls)
    m = heldout_metrics(rolls, tuple(k for k in (1, 4, 8) if k <= n))
    m["per_task"] = {t: sum(r.passed for r in rolls if r.task_id == t) for t in dict.fromkeys(r.task_id for r in rolls)}
    return m


def _class_attribution(before: dict, mid: dict, after: dict) -> dict:
    """Per failure class: how many held-out failures each lever removed (negative = added)."""
    out = {}
    for c in sorted(set(before) | set(mid) | set(after)):
        b, m, a = before.get(c, 0), mid.get(c, 0), after.get(c, 0)
        out[c] = {"before": b, "after": a, "removed_by_weights": b - m, "removed_by_prompt": m - a}
    return out


def _all_fail_share(train: list[Rollout]) -> float:
    """Share of the batch's tasks on which no sample passed the verifier (under any prompt)."""
    passed: dict[str, bool] = {}
    for r in train:
        passed[r.task_id] = passed.get(r.task_id, False) or r.passed
    return float(np.mean([not p for p in passed.values()])) if passed else 0.0


def _train_metrics(train: list[Rollout], routing: Routing, out: Outcome, state: LoopState) -> dict:
    summary = routing.summary()
    return {
        "train_reward": float(np.mean([r.reward for r in train])) if train else 0.0,
        "train_pass_rate": float(np.mean([r.passed for r in train])) if train else 0.0,
        "all_fail_task_fraction": _all_fail_share(train),
        "routing": summary,
        "zero_variance_fraction": summary["zero_variance_fraction"],
        "update": out.update_stats,
        "proposals": len(out.proposals),
        "accepted": sum(1 for p in out.proposals if p["accepted"]),
        "rollouts_spent": state.rollouts_spent,
        "reused_rollouts": len(state.carried),
    }
