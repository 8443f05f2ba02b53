"""The update's shared-prompt forward (evolve/policy/prompt_sharing.py) against every row's own forward, on a
real pre-trained model (SmolLM2-135M-Instruct, LoRA, float32 so the comparison does not depend on the CPU's
bf16 kernels): the same loss, log-probs and LoRA gradients up to float rounding, each distinct prompt embedded
once, and the choice recorded per checkpoint (one recording none keeps every row's own forward)."""

from __future__ import annotations

import json

import pytest
import torch
from token_counter import TokenCounter

from evolve.gym import load_gym
from evolve.policy import load_policy
from evolve.policy.chat import encode_prompt
from evolve.policy.prompt_sharing import PER_ROW, SHARED_PROMPT, prompt_units
from evolve.prompt.candidate import render_messages
from evolve.rollout import Rollout

COMPLETIONS = ["```python\ndef f(x):\n    return x + 1\n```", "```python\ndef f(x):\n    return sorted(x)[::-1]\n```",
               "I think the answer is to loop.\n```python\ndef f(xs):\n    out = []\n    for x in xs:\n"
               "        out.append(x * 2)\n    return out\n```", "```python\nreturn 0\n```", "no code"]


@pytest.fixture(scope="module")
def policy(smollm2_spec):
    torch.set_num_threads(1)
    spec = smollm2_spec.model_copy(update={
        "dtype": "float32", "finetune": "lora",
        "grpo": smollm2_spec.grpo.model_copy(update={"micro_batch_size": 2, "advantage": "grpo"})})
    return load_policy(spec)


def _groups(tokenizer) -> list[list[Rollout]]:
    """Three tasks: one prompt x 3 rows; two prompt arms x 2 rows (a challenger's 2 vs 2); one prompt x 3
    rows. With micro-batches of 2 some micro-batches hold rows of two prompts of different lengths."""
    tasks = load_gym("train", seed=0, n=3)
    arms = [[{"system": "Write f."}], [{"system": "Write f."}, {"system": "Write f. Check the empty input first."}],
            [{"system": "Write the function f."}]]
    groups, reward = [], [1.0, 0.0, 0.0, 1.0]
    for g, (task, systems) in enumerate(zip(tasks, arms, strict=True)):
        rows = 3 if len(systems) == 1 else 2
        group = []
        for a, system in enumerate(systems):
            text, ids = encode_prompt(tokenizer, render_messages(system, task))
            for _ in range(rows):
                k = len(group)
                comp = tokenizer(COMPLETIONS[(g + k) % len(COMPLETIONS)], add_special_tokens=False)["input_ids"]
                group.append(Rollout(task_id=task.task_id, group=g, sample_index=k, prompt_version=f"p{a}",
                                     weights_version="w", messages=[], prompt_text=text, completion="",
                                     reward=reward[(g + k) % 4], prompt_ids=ids, completion_ids=comp))
        groups.append(group)
    return groups


def _run(policy, groups, forward: str):
    up, model = policy.updater, policy.model
    up.forward = forward
    prep = up.prepare(groups)
    up.optimizer.zero_grad(set_to_none=True)
    counter = TokenCounter(model)
    out = up.backward_pass(prep)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    tokens = counter.tokens
    counter.tokens = 0
    with torch.no_grad():
        logps = up._all_logprobs(model, prep)
    up.optimizer.zero_grad(set_to_none=True)
    return out["loss"], grads, logps, tokens, prep


def test_the_shared_prompt_forward_equals_every_rows_own_on_a_real_model(policy):
    groups = _groups(policy.tokenizer)
    assert policy.resolved["update_forward"] == SHARED_PROMPT  # a real model's fresh policy shares its prompts
    loss_rows, grads_rows, logps_rows, tokens_rows, prep = _run(policy, groups, PER_ROW)
    loss_shared, grads_shared, logps_shared, tokens_shared, _ = _run(policy, groups, SHARED_PROMPT)

    prompts = prep.prompts
    units = prompt_units(prompts)
    assert len(prompts) == 10 and len(set(units)) == 4  # 3 + (2 + 2) + 3 rows, four distinct prompts
    assert any(units[s] != units[s + 1] and len(prompts[s]) != len(prompts[s + 1]) for s in prep.starts[:-1])
    assert abs(loss_rows - loss_shared) <= 1e-5 * max(1.0, abs(loss_rows)), (loss_rows, loss_shared)
    for a, b, t in zip(logps_rows, logps_shared, prep.tensors, strict=True):  # padding's log-probs mean nothing
        assert float(((a - b) * t[3]).abs().max()) < 1e-4
    assert set(grads_rows) == set(grads_shared) and len(grads_rows) >= 4 * 30  # LoRA A and B of q, k, v, o
    scale = max(float(g.abs().max()) for g in grads_rows.values())
    assert scale > 1e-6  # the gradients are not trivially zero
    worst = max(float((grads_rows[n] - grads_shared[n]).abs().max()) for n in grads_rows)
    assert worst <= 1e-3 * scale, (worst, scale)

    # what each forward embedded: every row its micro-batch's padded prompt + completion, or each prompt once
    per_row = sum(t[0].numel() + t[2].numel() for t in prep.tensors)
    shared = sum(len(prompts[units.index(u)]) for u in set(units)) + sum(t[2].numel() for t in prep.tensors)
    assert tokens_rows == per_row and tokens_shared == shared and shared < 0.75 * per_row


def test_a_checkpoint_keeps_the_update_forward_its_run_used(policy, tmp_path, tiny_model_dir):
    from pathlib import Path

    from evolve.policy import PolicySpec

    ckpt = policy.save(tmp_path / "ckpt")
    assert load_policy(policy.spec, checkpoint_dir=ckpt).updater.forward == SHARED_PROMPT
    meta_path = ckpt / "policy.json"
    meta = json.loads(meta_path.read_text())
    del meta["resolved"]["update_forward"]  # as an evolve from before the choice wrote it
    meta_path.write_text(json.dumps(meta))
    assert load_policy(policy.spec, checkpoint_dir=ckpt).updater.forward == PER_ROW
    repo = Path(__file__).resolve().parents[2]
    tiny = load_policy(PolicySpec.from_toml(repo / "policies" / "tiny-coder-ci.toml"))
    assert tiny.resolved["update_forward"] == PER_ROW  # the gym's recorded runs and figures stay reproducible
