"""Train every learning sample in the incumbent's context (``update_prompt = "incumbent"``).

Issue 38's candidate fix for the no-lesson world's cost: re-render a challenger's completions under the
incumbent's prompt (the one held-out evaluation uses) for the update, keeping tokens, reward and the task's
shared baseline (pi_old = current log-probs: a REINFORCE-style term on log pi(completion | incumbent), off-policy
in context as distill.py). Measured worse (coupled-sfp-inc in benchmarks/results/ablation38_nolesson.json).
"""

from __future__ import annotations

from dataclasses import replace

from evolve.env.render import render_messages
from evolve.policy.chat import encode_prompt
from evolve.prompt.candidate import Candidate
from evolve.rollout import Rollout


def recontext_groups(ctx, groups: list[list[Rollout]], incumbent: Candidate) -> list[list[Rollout]]:
    """``groups`` with every rollout sampled under a prompt other than ``incumbent`` re-rendered under it."""
    tokenizer = getattr(ctx.policy, "tokenizer", None)
    if tokenizer is None:
        return groups
    cache: dict[str, tuple[list[dict], str, list[int]]] = {}

    def under_incumbent(r: Rollout) -> Rollout:
        if r.prompt_version == incumbent.id:
            return r
        if r.task_id not in cache:
            msgs = render_messages(incumbent.components, ctx.tasks_by_id[r.task_id])
            text, ids = encode_prompt(tokenizer, msgs)
            cache[r.task_id] = (msgs, text, list(ids))
        msgs, text, ids = cache[r.task_id]
        return replace(r, prompt_version=incumbent.id, messages=msgs, prompt_text=text, prompt_ids=ids,
                       advantage=None)

    return [[under_incumbent(r) for r in group] for group in groups]
