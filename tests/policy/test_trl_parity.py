"""Loss and gradients match TRL 1.16 GRPOTrainer's on the same model, rollouts and seed (<= 1e-5).

TRL's own ``compute_loss`` is called on an inputs dict built exactly as its
``_generate_and_score_completions`` builds it; advantages use TRL's formula (group mean, unbiased
std + 1e-4 for scale_rewards="group"; mean only for "none").
"""

from __future__ import annotations

import copy

import pytest
import torch

from evolve.policy.spec import PolicySpec
from evolve.policy.updater import Updater
from evolve.rollout import Rollout

G, N_PROMPTS, PROMPT_LEN, MAX_LEN = 4, 2, 6, 12


def _batch(vocab: int):
    gen = torch.Generator().manual_seed(7)
    prompts = torch.randint(5, vocab, (N_PROMPTS, PROMPT_LEN), generator=gen)
    comp_lens = [12, 5, 9, 1, 7, 12, 3, 10]  # ragged: exercises the completion mask
    completions = torch.randint(5, vocab, (N_PROMPTS * G, MAX_LEN), generator=gen)
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, 0.0, 1.0, 1.0, 0.25])
    return prompts, completions, comp_lens, rewards


def _trl_advantages(rewards: torch.Tensor, scale: str) -> torch.Tensor:
    grouped = rewards.view(-1, G)
    adv = rewards - grouped.mean(1).repeat_interleave(G)
    if scale == "group":
        adv = adv / (grouped.std(1).repeat_interleave(G) + 1e-4)
    return adv


def _trl_loss_and_grads(model, tmp_path, loss_type, scale, inputs):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"), bf16=False, use_cpu=True, report_to=[], loss_type=loss_type,
        scale_rewards=scale, beta=0.0, num_generations=G, per_device_train_batch_size=N_PROMPTS * G,
        max_completion_length=MAX_LEN, temperature=1.0, epsilon=0.2, logging_steps=1000, seed=0,
    )
    ds = Dataset.from_dict({"prompt": ["a"] * N_PROMPTS})
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                          args=args, train_dataset=ds, processing_class=inputs.pop("tokenizer"))
    trainer.current_gradient_accumulation_steps = 1  # what train() sets with gradient_accumulation_steps=1
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("loss_type,scale", [("grpo", "group"), ("dr_grpo", "none")])
def test_loss_and_grads_match_trl(random_model_dir, tmp_path, loss_type, scale):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(random_model_dir)
    base = AutoModelForCausalLM.from_pretrained(random_model_dir, dtype=torch.float32)
    ours_model, trl_model = copy.deepcopy(base), copy.deepcopy(base)
    prompts, completions, lens, rewards = _batch(base.config.vocab_size)
    adv = _trl_advantages(rewards, scale)

    # TRL side: exactly the keys _generate_and_score_completions hands to compute_loss.
    cmask = torch.zeros(N_PROMPTS * G, MAX_LEN, dtype=torch.long)
    for i, n in enumerate(lens):
        cmask[i, :n] = 1
    prompt_ids = prompts.repeat_interleave(G, dim=0)
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
              "completion_ids": completions * cmask + tok.pad_token_id * (1 - cmask), "completion_mask": cmask,
              "advantages": adv, "num_items_in_batch": cmask.sum(), "tokenizer": tok}
    trl_loss, trl_grads = _trl_loss_and_grads(trl_model, tmp_path, loss_type, scale, inputs)

    # Ours: the real updater path (advantages from our estimator with TRL's eps, same rows).
    spec = PolicySpec.from_dict({
        "model": str(random_model_dir), "sampling": {"max_new_tokens": MAX_LEN, "temperature": 1.0},
        "grpo": {"advantage": "grpo", "loss_type": loss_type, "scale_rewards": scale, "eps": 1e-4,
                 "micro_batch_size": N_PROMPTS * G, "skip_zero_variance": False},
    })
    groups = [[Rollout(task_id=f"t{g}", group=g, sample_index=i, prompt_version="p", weights_version="w",
                       messages=[], prompt_text="", completion="", reward=float(rewards[g * G + i]),
                       prompt_ids=prompts[g].tolist(), completion_ids=completions[g * G + i, :lens[g * G + i]].tolist())
               for i in range(G)] for g in range(N_PROMPTS)]
    up = Updater(ours_model, spec, tok.pad_token_id)
    prep = up.prepare(groups)
    got_adv = torch.tensor([r.advantage for grp in groups for r in grp], dtype=torch.float32)
    assert torch.allclose(got_adv, adv, atol=1e-6)
    up.optimizer.zero_grad(set_to_none=True)
    ours = up.backward_pass(prep)

    assert abs(ours["loss"] - float(trl_loss)) <= 1e-5
    our_grads = {n: p.grad for n, p in ours_model.named_parameters() if p.grad is not None}
    assert set(our_grads) == set(trl_grads) and len(our_grads) > 10
    worst = max(float((our_grads[n] - trl_grads[n]).abs().max()) for n in our_grads)
    assert worst <= 1e-5, f"max grad difference {worst}"
    assert max(float(g.abs().max()) for g in our_grads.values()) > 1e-4  # the gradients are not trivially 0
