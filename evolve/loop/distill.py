"""EXPERIMENTAL context distillation: lessons reach the weights (``distill = "seed"``).

A rollout sampled under a prompt with lessons is also trained as if it had been sampled under the
seed prompt: same completion tokens and reward, prompt ids re-rendered from the seed prompt. With
the on-policy ratio (pi_old = the current log-probs, detached) this is a REINFORCE-style update of
log pi(completion | seed prompt) weighted by the advantage the completion earned under the lesson
prompt -- "guided rollouts trained as unguided" (POPE 2601.18779, SAGE 2602.03143) rather than the
reverse-KL distillation of FST-distill or OPCD (2602.12275), which need the teacher's full
distribution per token. Departure, written down: the behaviour log-probs stored on the copy are
those of the lesson prompt; they only enter with ``grpo.old_logprobs = "behaviour"``.

Only the non-seed members of each weight group are copied, and the advantage is recomputed among
them (the updater applies the estimator to each group it is given), so a group needs reward
variance among its lesson-prompt samples to distil anything.
"""

from __future__ import annotations

from dataclasses import replace

from evolve.env.render import render_messages
from evolve.policy.chat import encode_prompt
from evolve.rollout import Rollout


def distill_groups(ctx, weight_groups: list[list[Rollout]]) -> list[list[Rollout]]:
    seed = ctx.evolver.seed
    tokenizer = getattr(ctx.policy, "tokenizer", None)
    if tokenizer is None:
        return []
    cache: dict[str, tuple[list[dict], str, list[int]]] = {}
    out = []
    for group in weight_groups:
        lesson = [r for r in group if r.prompt_version != seed.id]
        if len(lesson) < 2 or len({r.reward for r in lesson}) < 2:
            continue
        copies = []
        for r in lesson:
            if r.task_id not in cache:
                msgs = render_messages(seed.components, ctx.tasks_by_id[r.task_id])
                text, ids = encode_prompt(tokenizer, msgs)
                cache[r.task_id] = (msgs, text, list(ids))
            msgs, text, ids = cache[r.task_id]
            copies.append(replace(r, prompt_version=seed.id, messages=msgs, prompt_text=text, prompt_ids=ids,
                                  advantage=None))
        out.append(copies)
    return out
