"""In-group prompt selection: the incumbent and one challenger share every task's GRPO group.

Departures from the papers, on purpose:
- Fast-Slow Training (arXiv 2605.12484) samples several Pareto-front prompts in each group and
  keeps the front with GEPA rounds; E-SPL (arXiv 2602.14697) rates M prompts with TrueSkill from
  the same batch. Here the incumbent keeps half of each group (the prompt the weights are mostly
  trained and evaluated under), one challenger gets the rest, and a challenger replaces the
  incumbent only when a paired test with a stated error rate says it is better
  (``evolve.prompt.evidence``), instead of a rating that moves every step.
- Prompts are compared on the verdict (passed, the unit of pass@1) while the weights learn from the
  verifier's partial-credit reward; both papers rate prompts on the reward they train on. A lesson
  that turns near-misses into passes barely moves the reward.
- The incumbent and the challenger are sampled with the same seed on the same weights (common random
  numbers), so their paired per-task differences are less noisy.
- One advantage baseline per task across prompts (E-SPL's "marginalize"): samples under a better
  prompt get a positive advantage.
- Reflection fills the challenger pool from the incumbent's routed failures; proposals are never
  evaluated on rollouts of their own: the rollouts that score them also train the weights.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import cast

import numpy as np

from evolve.loop.config import GenerationSeeds
from evolve.loop.context import LoopContext, Timer
from evolve.loop.rollouts import task_scores
from evolve.loop.selection.base import Arm, Judged, Judgement
from evolve.loop.selection.configs import InGroupSelection
from evolve.loop.state import LoopState
from evolve.metrics import ChallengerRecord, UpdateRecord
from evolve.prompt.challengers import Challenger
from evolve.prompt.evidence import EvidenceRule, log_wealth
from evolve.prompt.evolver import PromptEvolver
from evolve.rollout import Rollout


def evidence_rule(sel: InGroupSelection) -> EvidenceRule:
    return EvidenceRule(alpha=sel.promote_alpha, margin=sel.promote_margin, alpha_retire=sel.retire_alpha,
                        cap=sel.evidence_cap, looks=sel.promote_looks)


def paired_differences(incumbent: list[Rollout], challenger: list[Rollout],
                       by: str = "passed") -> tuple[list[float], dict[str, float]]:
    """Per task sampled under both: challenger's mean score - incumbent's (``by``: "passed", or
    "reward" for the random control's draw); plus the challenger's scores."""
    inc, ch = task_scores(incumbent, by), task_scores(challenger, by)
    shared = [t for t in inc if t in ch]  # first-seen order of the incumbent's tasks
    return [ch[t] - inc[t] for t in shared], ch


def first_per_task(rollouts: list[Rollout], k: int) -> list[Rollout]:
    """Each task's first ``k`` rollouts (in order). The challenger's k samples are compared with k of the
    incumbent's, never with more: two means of k exchangeable samples differ symmetrically about 0 under
    "the line changes nothing", which the exact sign-flip test needs; k vs G - k would not be symmetric."""
    seen: dict[str, int] = {}
    out = []
    for r in rollouts:
        seen[r.task_id] = seen.get(r.task_id, 0) + 1
        if seen[r.task_id] <= k:
            out.append(r)
    return out


@dataclass(frozen=True)
class InGroup:
    """``[loop.selection] type = "in_group"`` (see the module docstring)."""

    sel: InGroupSelection
    type: str = "in_group"

    def arms(self, ctx: LoopContext, state: LoopState, seeds: GenerationSeeds, group_size: int) -> list[Arm]:
        """The incumbent, plus the challenger Thompson sampling picks (seeded per generation) when the
        group is whole: half of it each."""
        ev, sel = ctx.evolver, self.sel
        ev.pool.cap = sel.challenger_pool  # the loop config owns the cap
        incumbent = Arm(ev.current(), group_size)
        picked = ev.pool.pick_thompson(1, sel.thompson_prior_sd, np.random.default_rng(seeds.reflect))
        if not picked or group_size < ctx.config.samples_per_task:
            return [incumbent]
        per = ctx.config.samples_per_task // 2
        incumbent.samples = group_size - per
        return [incumbent, Arm(picked[0].candidate, per, picked[0])]

    def update_record(self, carried_groups: int, distill_groups: int) -> UpdateRecord:
        return {"distill_groups": distill_groups}

    def rule(self) -> EvidenceRule:
        return evidence_rule(self.sel)

    def judge(self, ctx: LoopContext, state: LoopState, judged: Judged, timer: Timer) -> Judgement:
        ev, rule = ctx.evolver, self.rule()
        inc_rolls, records, promoted = judged.arms[0].rollouts, [], []
        with timer.phase("select_prompt"):
            for arm in judged.arms[1:]:
                c = arm.challenger
                assert c is not None  # arms() gives every arm after the incumbent's its challenger
                paired = first_per_task(inc_rolls, arm.samples)  # in_group: the incumbent's 4 of 8 are all
                diffs, scores = paired_differences(paired, arm.rollouts, ctx.config.selection_signal)
                c.scores.update(scores)
                rule.decide(c.evidence, diffs)
                records.append(challenger_record(ev, c, len(arm.rollouts), rule))
                if c.evidence.decision == "promoted":
                    promoted.append(c)
            best = max(promoted, key=lambda c: log_wealth(c.evidence.diffs, rule.margin), default=None)
            for c in (arm.challenger for arm in judged.arms[1:]):
                if c is not None and (c.evidence.decision.startswith("retired") or c is best):
                    ev.resolve(c, judged.index, rule)
        verdict = Judgement(metrics={"challengers": records, "promoted": best.id if best is not None else None})
        if ev.pool.room > 0 or self._weakest(ctx) is not None:
            self._reflect_into_pool(ctx, judged, verdict, timer)
        verdict.metrics["pool"] = [{"id": c.id, "n": c.evidence.n, "decision": c.evidence.decision}
                               for c in ev.pool.active]
        return verdict  # in-group selection spends no rollouts outside the groups: nothing to carry

    def _weakest(self, ctx: LoopContext) -> Challenger | None:
        """The challenger eviction would retire now (``evict_below``), or None."""
        sel = self.sel
        if not sel.evict_below:
            return None
        return ctx.evolver.pool.weakest(sel.thompson_prior_sd, sel.evict_below)

    def _reflect_into_pool(self, ctx: LoopContext, judged: Judged, verdict: Judgement, timer: Timer) -> None:
        """Reflection on the current incumbent's routed failures (and successes for contrast); the
        proposals (and any challenger evicted for one) go into ``verdict``."""
        ev, routing = ctx.evolver, judged.routing
        parent = ev.current()
        traces = [r for r in routing.reflection_rollouts + routing.contrast_rollouts if r.prompt_version == parent.id]
        with timer.phase("reflect"):
            proposals = ev.propose(parent, traces, random.Random(judged.seeds.reflect), generation=judged.index)
        for p in proposals:
            if ev.pool.room == 0:
                weak = self._weakest(ctx)
                if weak is not None:  # make room: the challenger least likely to beat the incumbent leaves
                    weak.evidence.decision = "retired-evicted"
                    ev.resolve(weak, judged.index, self.rule())
                    verdict.metrics.setdefault("evicted", []).append(weak.id)
            admitted = ev.admit(p, judged.index)
            verdict.proposals.append({"proposal": p, "accepted": admitted, "minibatch": None, "parent_minibatch": None,
                                  "meta": {"selection": self.type, "admitted_to_pool": admitted}})


def challenger_record(ev: PromptEvolver, c: Challenger, samples: int, rule: EvidenceRule) -> ChallengerRecord:
    """One sampled challenger's line in metrics ``challengers`` (its evidence summary after this look)."""
    head: ChallengerRecord = {"id": c.id, "kind": c.kind, "added": _added_text(ev, c), "samples": samples}
    return cast(ChallengerRecord, {**head, **c.evidence.summary(rule)})  # summary: the evidence keys


def _added_text(ev: PromptEvolver, c: Challenger) -> str:
    """The lesson lines a challenger adds to its first parent (what a reader wants to see)."""
    if not c.parents or not ev.knows(c.parents[0]):
        return ""
    return " / ".join(ev.added_lessons(c.candidate, c.parents))[:120]
