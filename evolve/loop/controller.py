"""One generation of the loop, top to bottom: select tasks, ask the prompt-selection rule which
prompts share the groups, roll out, verify, route, update the weights, let the rule judge (promote
or retire, reflect), evaluate held-out. Committing is the caller's job (see ``evolve.loop.runner``),
so replay can run the very same function.

Departure from FST, on purpose: FST interleaves a GEPA round every T RL steps on separate rollouts;
here every generation reflects on the same rollouts, routed by group variance (see routing.py), and
the rule's departures from GEPA and E-SPL are written in its own file (``evolve/loop/selection/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from evolve.errors import EvolveError
from evolve.loop.config import GenerationSeeds
from evolve.loop.context import (
    LoopContext,
    LoopPolicy,
    Outcome,
    Progress,
    Timer,
    budget_left,
    plan_batch,
    tick,
)
from evolve.loop.distill import distill_groups
from evolve.loop.guided_retry import GuidedRetries, guided_update_groups
from evolve.loop.recontext import recontext_groups
from evolve.loop.rollouts import (
    PENDING_WEIGHTS,
    heldout_metrics,
    original_metrics,
    roll_out,
    roll_out_arms,
    verify,
)
from evolve.loop.routing import Routing, group_by_task, route, turn_level
from evolve.loop.selection.base import Judged, PromptSelection
from evolve.loop.selection.registry import selection_for
from evolve.loop.state import LoopState, rollout_from_dict, rollout_to_dict
from evolve.metrics import (
    ClassAttribution,
    FinalHeldout,
    HeldoutMetrics,
    HeldoutPart,
    TrainMetrics,
    UpdateRecord,
)
from evolve.prompt.candidate import Candidate
from evolve.rollout import Rollout

__all__ = ["LoopContext", "LoopPolicy", "Outcome", "full_heldout", "plan_batch", "run_generation"]


def run_generation(ctx: LoopContext, state: LoopState, index: int, seeds: GenerationSeeds,
                   parent_weights: str, parent_heldout: HeldoutMetrics | None,
                   progress: Progress | None = None) -> Outcome:
    cfg, timer, selection = ctx.config, Timer(), selection_for(ctx)
    prompt = ctx.evolver.current()
    out = Outcome(index=index, seeds=seeds, prompt=prompt, loop_state=state, parent_weights=parent_weights)
    out.budget_left = None if cfg.max_rollouts is None else cfg.max_rollouts - state.rollouts_spent
    # 0. the sampler starts empty (vLLM's prefix cache), as a resumed, forked or replayed generation does
    ctx.policy.begin_generation()

    with timer.phase("select"):  # 1. select tasks (fewer, or a smaller group, at the end of the budget)
        n_tasks, group_size = plan_batch(cfg.tasks_per_generation, cfg.samples_per_task, out.budget_left)
        picks = state.sampler.take(len(ctx.train_tasks), n_tasks)
        tasks = [ctx.train_tasks[i] for i in picks]
        arms = selection.arms(ctx, state, seeds, group_size)  # 2. which prompts share each task's group
    tick(progress, "rollout")
    with timer.phase("rollout"):  # 3. one seed for every prompt: common random numbers
        roll_out_arms(ctx, arms, tasks, seeds.sample, parent_weights)
    train = [r for arm in arms for r in arm.rollouts]
    with timer.phase("verify"):  # 4. every rollout verified once; it feeds both levers
        verify(ctx.verifier, ctx.tasks_by_id, train, seeds.reward if cfg.reward == "random" else None)
    out.rollouts += train
    out.routing = route(group_by_task(train), cfg.recurring_failure_min_groups, cfg.all_fail_groups == "both",
                        turn_level(ctx.policy))  # 5. route each group to the lever that can use it

    tick(progress, "update")
    if ctx.learn_weights:  # 6. GRPO-family update on exactly the routed groups (+ carried, distilled, guided)
        with timer.phase("update"):
            update = _update_weights(ctx, state, seeds, prompt, selection, out)
        out.update_groups, out.update_stats = update.groups, update.stats
        if update.guided is not None:
            out.rollouts += update.guided.retries
            out.metrics["guided"] = update.guided.metrics()
    tick(progress, "reflect")  # 7. promote, retire, reflect
    verdict = selection.judge(ctx, state, Judged(index, seeds, arms, tasks, out.routing, out.rollouts), timer)
    out.rollouts += verdict.rollouts
    out.proposals = verdict.proposals
    out.metrics.update(verdict.metrics)
    state.carried = [rollout_to_dict(r) for r in verdict.carry]

    tick(progress, "heldout")
    if cfg.heldout_each_generation:  # off: as much sampling as the learning saved (heldout_full replaces it)
        with timer.phase("heldout"):  # 8. held-out evaluation (and the split between the levers)
            heldout, rolls = _evaluate_heldout(ctx, prompt, seeds, parent_heldout)
        out.rollouts += rolls
        out.metrics.update(heldout)
    if "guided" in out.metrics and "heldout" in out.metrics:  # the leakage audit's unguided figure
        out.metrics["guided"]["heldout_pass1_unguided"] = out.metrics["heldout"]["pass@1"]

    state.rollouts_spent += sum(1 for r in out.rollouts if r.purpose != "heldout")
    if cfg.max_rollouts is not None and state.rollouts_spent > cfg.max_rollouts:  # a bug, never a policy
        raise EvolveError(f"budget overshoot: {state.rollouts_spent} > max_rollouts {cfg.max_rollouts}")
    final, rolls = _final_heldout(ctx, seeds, index, state, timer)
    out.rollouts += rolls
    out.metrics.update(final)
    if "heldout" in out.metrics:
        state.heldout_history.append(out.metrics["heldout"]["pass@1"])
    out.metrics.update(_train_metrics([r for r in out.rollouts if r.purpose == "train"], out.routing, out, state))
    out.metrics["levers"] = {"weights": ctx.learn_weights, "prompt": ctx.learn_prompt}
    out.metrics["selection"] = cfg.selection.type if ctx.learn_prompt else None
    out.timings = timer.spent
    return out


@dataclass
class WeightUpdate:
    """What the weight-update phase returns: exactly the groups the update was given, its record, and the
    guided retries it sampled (None when none were tried)."""

    groups: list[list[Rollout]]
    stats: UpdateRecord
    guided: GuidedRetries | None


def _update_weights(ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, prompt: Candidate,
                    selection: PromptSelection, out: Outcome) -> WeightUpdate:
    """The routed groups, the rollouts the last generation carried (gate: the winner's evaluation, on-policy
    here), their distilled copies (``distill = "seed"``) and guided retries of all-fail groups; a failed
    group that got retries is replaced by the group with them."""
    cfg = ctx.config
    carried = route(group_by_task([rollout_from_dict(d) for d in state.carried]), cfg.recurring_failure_min_groups,
                    cfg.all_fail_groups == "both", turn_level(ctx.policy))
    extra = distill_groups(ctx, out.routing.weight_groups + carried.weight_groups) if cfg.distill == "seed" else []
    train = group_by_task(out.rollouts)  # this generation's rollouts so far are its train rollouts
    guided = guided_update_groups(ctx, prompt, train, (seeds.sample * 31 + 7) % (2**31 - 1), out.parent_weights,
                                  budget_left(cfg, state, out.rollouts))
    guided_groups = guided.groups if guided is not None else []
    retried = {g[0].task_id for g in guided_groups}
    weight = [g for g in out.routing.weight_groups if g[0].task_id not in retried]
    groups = weight + carried.weight_groups + extra + guided_groups
    if cfg.update_prompt == "incumbent":  # every completion trained in the context held-out evaluates
        groups = recontext_groups(ctx, groups, prompt)
    # UpdateStats' fields are UpdateRecord's (tests/loop/test_metrics_types.py); asdict types them loosely
    stats = cast(UpdateRecord, ctx.policy.update(groups).to_dict())
    stats.update(selection.update_record(len(carried.weight_groups), len(extra)))
    return WeightUpdate(groups, stats, guided)


def _evaluate_heldout(ctx: LoopContext, old_prompt: Candidate, seeds: GenerationSeeds,
                      parent_heldout: HeldoutMetrics | None) -> tuple[HeldoutPart, list[Rollout]]:
    """Held-out metrics of the prompt the judge left (and of the seed prompt, and of the old prompt on
    the new weights for the attribution), with every held-out rollout in the order sampled."""
    cfg = ctx.config
    new_prompt = ctx.evolver.current()
    m: HeldoutPart = {}
    rollouts: list[Rollout] = []

    def evaluate(cand: Candidate, both: bool = False) -> HeldoutMetrics:
        rolls = roll_out(ctx, cand, ctx.heldout_tasks, cfg.heldout_samples, seeds.heldout, "heldout",
                         PENDING_WEIGHTS)
        verify(ctx.verifier, ctx.tasks_by_id, rolls, None)
        rollouts.extend(rolls)
        h = heldout_metrics(rolls, cfg.heldout_ks)
        if both and ctx.original_tasks:  # a verifier version: the same samples under the tasks' own tests
            m["heldout_original"] = original_metrics(ctx, rolls, cfg.heldout_ks, h)
        return h

    final = evaluate(new_prompt, both=True)
    m["heldout"] = final
    m["prompt_changed"] = new_prompt.id != old_prompt.id
    seed = ctx.evolver.seed
    if cfg.heldout_seed_prompt:  # "does the model still need the prompt?"
        m["heldout_seed"] = final if seed.id == new_prompt.id else evaluate(seed)
    if parent_heldout is None:
        return m, rollouts
    # Split the gain: (old prompt, new weights) isolates the weight update's part.
    if new_prompt.id != old_prompt.id and cfg.attribution:
        mid = evaluate(old_prompt) if ctx.learn_weights else parent_heldout
    else:
        mid = final
    m["attribution"] = {
        "delta_weights": mid["pass@1"] - parent_heldout["pass@1"],
        "delta_prompt": final["pass@1"] - mid["pass@1"],
        "classes": _class_attribution(parent_heldout["failure_classes"], mid["failure_classes"],
                                      final["failure_classes"]),
    }
    return m, rollouts


def _final_heldout(ctx: LoopContext, seeds: GenerationSeeds, index: int, state: LoopState,
                   timer: Timer) -> tuple[FinalHeldout, list[Rollout]]:
    """At the last generation (budget spent or ``generations`` reached): the full held-out figure."""
    cfg = ctx.config
    spent = cfg.max_rollouts is not None and state.rollouts_spent >= cfg.max_rollouts
    m: FinalHeldout = {}
    rollouts: list[Rollout] = []
    if cfg.heldout_final_tasks is None or not (spent or index >= cfg.generations):
        return m, rollouts
    with timer.phase("heldout_full"):
        m["heldout_full"] = full_heldout(ctx, ctx.evolver.current(), seeds, rollouts)
        if cfg.heldout_seed_prompt and ctx.evolver.current().id != ctx.evolver.seed.id:
            m["heldout_full_seed"] = full_heldout(ctx, ctx.evolver.seed, seeds, rollouts)
    return m, rollouts


def full_heldout(ctx: LoopContext, candidate: Candidate, seeds: GenerationSeeds, sink: list[Rollout]) -> HeldoutMetrics:
    """``heldout_final_tasks`` held-out tasks (0 = every one) x ``heldout_final_samples``, per-task passes kept."""
    cfg = ctx.config
    tasks = ctx.all_heldout_tasks or ctx.heldout_tasks
    if cfg.heldout_final_tasks:
        tasks = tasks[:cfg.heldout_final_tasks]
    n = cfg.heldout_final_samples
    rolls = roll_out(ctx, candidate, tasks, n, seeds.heldout, "heldout", PENDING_WEIGHTS)
    verify(ctx.verifier, ctx.tasks_by_id, rolls, None)
    sink.extend(rolls)
    ks = tuple(k for k in (1, 4, 8) if k <= n)
    m = heldout_metrics(rolls, ks)
    if ctx.original_tasks:  # a verifier version: the same samples under the tasks' own tests
        m["original"] = original_metrics(ctx, rolls, ks, m)
    m["per_task"] = {t: sum(r.passed for r in rolls if r.task_id == t) for t in dict.fromkeys(r.task_id for r in rolls)}
    return m


def _class_attribution(before: dict[str, int], mid: dict[str, int],
                       after: dict[str, int]) -> dict[str, ClassAttribution]:
    """Per failure class: how many held-out failures each lever removed (negative = added)."""
    out: dict[str, ClassAttribution] = {}
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


def _train_metrics(train: list[Rollout], routing: Routing, out: Outcome, state: LoopState) -> TrainMetrics:
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
