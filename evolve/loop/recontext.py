"""Train every learning sample in the incumbent's context (``update_prompt = "incumbent"``, the default).

Issue 38's no-lesson cost is the challenger's share of each group: its completions, trained under the
challenger's own prompt, do not carry over to the incumbent's context that held-out evaluation uses
(``ablation38_nolesson_incumbent_only.json``: training on the incumbent's half alone scores the same).
Here a challenger's completion is re-rendered under the incumbent's prompt for the update, keeping its
tokens, reward and the task's shared baseline. It was sampled from pi(. | challenger), so it is off-policy in
this context: the updater takes its pi_old under the challenger's prompt (``Rollout.sampled_prompt_ids``; a
no-grad forward before the first inner step), so the ratio is pi_theta(y | incumbent) / pi_old(y |
challenger), the importance weight, and PPO's clip bounds it (the off-policy reading of the clipped
surrogate, as in PPO on stale samples). From the trainer, not the sampler's log-probs: vLLM's are after top-p
(renormalised over the nucleus), which would bias every ratio by the nucleus mass.

Measured: without any correction (the current log-probs as pi_old, commit 583ad7b, arm ``coupled-sfp-inc``)
every completion counted as on-policy: worse on seeds 40-42. With the sampler's log-probs as pi_old for every
row (``grpo.old_logprobs = "behaviour"``, commit ca5c43d), seeds 40-55 against training each completion under
its own prompt, paired: +2.2 points [+0.2, +4.4] where no lesson helps, +2.1 [-0.4, +5.6] on the gym
(docs/ablation.md). This ratio (arm ``coupled-sfp-inc-is``) is that one on the gym's HF sampler up to
numerics, with the on-context rows on-policy. Made the default on that evidence and on the headline seeds
rerun under it (over the 31 gym seeds both rules ran, +0.7 points [-1.1, +2.8]; selection_goals.json).
"""

from __future__ import annotations

from dataclasses import replace

from evolve.env.render import render_messages
from evolve.errors import EvolveError
from evolve.policy.chat import encode_prompt
from evolve.prompt.candidate import Candidate
from evolve.rollout import Rollout


def recontext_groups(ctx, groups: list[list[Rollout]], incumbent: Candidate) -> list[list[Rollout]]:
    """``groups`` with every rollout sampled under a prompt other than ``incumbent`` re-rendered under it
    (sampling log-probs kept: the behaviour policy's)."""
    tokenizer = getattr(ctx.policy, "tokenizer", None)
    first_messages = ctx.env.first_messages if ctx.env is not None else render_messages
    cache: dict[str, tuple[list[dict], str, list[int]]] = {}

    def under_incumbent(r: Rollout) -> Rollout:
        if r.prompt_version == incumbent.id:
            return r
        if tokenizer is None:  # training it under the prompt it was sampled with would silently be the other rule
            raise EvolveError("update_prompt = \"incumbent\" needs a policy with a tokenizer (to re-render a "
                              "challenger's prompt); set loop.update_prompt = \"sampled\" for this one")
        if r.task_id not in cache:
            msgs = first_messages(incumbent.components, ctx.tasks_by_id[r.task_id])  # as the sampler rendered it
            text, ids = encode_prompt(tokenizer, msgs)
            cache[r.task_id] = (msgs, text, list(ids))
        msgs, text, ids = cache[r.task_id]
        return replace(r, prompt_version=incumbent.id, messages=msgs, prompt_text=text, prompt_ids=ids,
                       advantage=None, sampled_prompt_ids=list(r.prompt_ids))

    return [[under_incumbent(r) for r in group] for group in groups]
