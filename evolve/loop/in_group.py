"""In-group prompt selection: the incumbent and its challengers share every task's GRPO group.

Departures from the papers, on purpose:
- Fast-Slow Training (arXiv 2605.12484) samples several Pareto-front prompts in each group and
  keeps the front with GEPA rounds; E-SPL (arXiv 2602.14697) rates M prompts with TrueSkill from
  the same batch. Here the incumbent keeps at least half of each group (the prompt the weights are
  mostly trained and evaluated under), a few challengers share the rest, and a challenger replaces
  the incumbent only when a paired test with a stated error rate says it is better
  (``evolve.prompt.evidence``), instead of a rating that moves every step.
- Prompts are compared on the verdict (``selection_score = "passed"``, the unit of pass@1) while the
  weights learn from the verifier's partial-credit reward; both papers rate prompts on the reward
  they train on. A lesson that turns near-misses into passes barely moves the reward.
- The incumbent and challengers are sampled with the same seed on the same weights (common random
  numbers), so their paired per-task differences are less noisy.
- Reflection fills the challenger pool from the incumbent's routed failures; proposals are never
  evaluated on rollouts of their own: the rollouts that score them also train the weights.
"""

from __future__ import annotations

import random

import numpy as np

from evolve.loop.distill import distill_groups
from evolve.loop.rollouts import roll_out, task_scores, verify
from evolve.loop.routing import group_by_baseline, route, turn_level
from evolve.prompt.evidence import EvidenceRule, log_wealth
from evolve.rollout import Rollout


def evidence_rule(cfg) -> EvidenceRule:
    return EvidenceRule(alpha=cfg.promote_alpha, margin=cfg.promote_margin, alpha_retire=cfg.retire_alpha,
                        cap=cfg.evidence_cap, test=cfg.promote_test, looks=cfg.promote_looks)


def split_group(cfg, n_challengers: int, group_size: int) -> tuple[int, int]:
    """(incumbent samples, samples per challenger) of one task's group."""
    if n_challengers == 0 or group_size < cfg.samples_per_task:
        return group_size, 0
    per = cfg.samples_per_challenger
    return group_size - n_challengers * per, per


def paired_differences(incumbent: list[Rollout], challenger: list[Rollout],
                       by: str = "reward") -> tuple[list[float], dict]:
    """Per task sampled under both: challenger's mean score - incumbent's (``by``: "reward" or
    "passed"); plus the challenger's scores."""
    inc, ch = task_scores(incumbent, by), task_scores(challenger, by)
    shared = [t for t in inc if t in ch]  # first-seen order of the incumbent's tasks
    return [ch[t] - inc[t] for t in shared], ch


def run_in_group(ctx, state, index: int, seeds, tasks, group_size: int, out, timer, progress, tick) -> None:
    """Steps 2-7 of a generation under ``selection = "in_group"`` (see the controller)."""
    cfg, ev, rule = ctx.config, ctx.evolver, evidence_rule(ctx.config)
    ev.pool.cap = cfg.challenger_pool  # the loop config owns the cap (a resumed run may change it)
    state.carried = []  # in-group selection spends no rollouts outside the groups: nothing to carry
    random_seed = seeds.reward if cfg.reward == "random" else None
    incumbent = ev.current()
    picked = _pick(ev.pool, cfg, rule, seeds) if ctx.learn_prompt else []
    n_inc, n_ch = split_group(cfg, len(picked), group_size)
    if n_ch == 0:
        picked = []
    tick(progress, "rollout")
    with timer.phase("rollout"):  # one seed for every prompt: common random numbers
        inc_rolls = roll_out(ctx, incumbent, tasks, n_inc, seeds.sample, "train", out.parent_weights)
        ch_rolls = {c.id: roll_out(ctx, c.candidate, tasks, n_ch, seeds.sample, "train", out.parent_weights)
                    for c in picked}
    train = inc_rolls + [r for rolls in ch_rolls.values() for r in rolls]
    with timer.phase("verify"):  # every rollout verified once; it feeds both levers
        verify(ctx.verifier, ctx.tasks_by_id, train, random_seed)
    out.rollouts += train
    routing = route(group_by_baseline(train, cfg.baseline), cfg.recurring_failure_min_groups,
                    cfg.all_fail_groups == "both", turn_level(ctx.policy))
    out.routing = routing

    tick(progress, "update")
    if ctx.learn_weights:
        with timer.phase("update"):
            extra = distill_groups(ctx, routing.weight_groups) if cfg.distill == "seed" else []
            out.update_groups = routing.weight_groups + extra
            out.update_stats = ctx.policy.update(out.update_groups).to_dict()
            out.update_stats["distill_groups"] = len(extra)

    records = []
    with timer.phase("select_prompt"):
        for c in picked:
            diffs, scores = paired_differences(inc_rolls, ch_rolls[c.id], cfg.selection_signal)
            c.scores.update(scores)
            rule.decide(c.evidence, diffs)
            records.append({"id": c.id, "kind": c.kind, "added": _added_text(ev, c), "samples": len(ch_rolls[c.id]),
                            **c.evidence.summary(rule)})
        promoted = [c for c in picked if c.evidence.decision == "promoted"]
        best = max(promoted, key=lambda c: log_wealth(c.evidence.diffs, rule.margin), default=None)
        for c in picked:
            if c.evidence.decision.startswith("retired") or c is best:
                ev.resolve(c, index, rule)
    out.metrics["challengers"] = records
    out.metrics["promoted"] = best.id if best is not None else None

    tick(progress, "reflect")
    if ctx.learn_prompt and (ev.pool.room > 0 or _weakest(ev.pool, cfg) is not None):
        _reflect_into_pool(ctx, index, seeds, routing, out, timer)
    out.metrics["pool"] = [{"id": c.id, "n": c.evidence.n, "decision": c.evidence.decision} for c in ev.pool.active]


def _pick(pool, cfg, rule, seeds) -> list:
    """This generation's challengers (``challenger_pick``); Thompson draws are seeded per generation."""
    if cfg.challenger_pick == "thompson":
        return pool.pick_thompson(cfg.challengers, cfg.thompson_prior_sd, np.random.default_rng(seeds.reflect),
                                  cfg.thompson_variance == "empirical", cfg.thompson_untried_first)
    return pool.pick(cfg.challengers, rule)


def _weakest(pool, cfg):
    """The challenger eviction would retire now (``evict_below``), or None."""
    if cfg.evict_below is None:
        return None
    return pool.weakest(cfg.thompson_prior_sd, cfg.evict_below, cfg.thompson_variance == "empirical",
                        cfg.evict_margin)


def _reflect_into_pool(ctx, index, seeds, routing, out, timer) -> None:
    """Reflection on the current incumbent's routed failures (and successes for contrast)."""
    ev = ctx.evolver
    parent = ev.current()
    traces = [r for r in routing.reflection_rollouts + routing.contrast_rollouts if r.prompt_version == parent.id]
    with timer.phase("reflect"):
        proposals = ev.propose(parent, traces, random.Random(seeds.reflect))
    for p in proposals:
        if ev.pool.room == 0:
            weak = _weakest(ev.pool, ctx.config)
            if weak is not None:  # make room: the challenger least likely to beat the incumbent leaves
                weak.evidence.decision = "retired-evicted"
                ev.resolve(weak, index, evidence_rule(ctx.config))
                out.metrics.setdefault("evicted", []).append(weak.id)
        admitted = ev.admit(p, index)
        out.proposals.append({"proposal": p, "accepted": admitted, "minibatch": None, "parent_minibatch": None,
                              "meta": {"selection": "in_group", "admitted_to_pool": admitted}})


def _added_text(ev, c) -> str:
    """The lesson lines a challenger adds to its first parent (what a reader wants to see)."""
    from evolve.prompt.evolver import Proposal

    if not c.parents or ev._index(c.parents[0]) is None:
        return ""
    return " / ".join(ev._added_lessons(Proposal(c.candidate, c.parents, c.kind)))[:120]

