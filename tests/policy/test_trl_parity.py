"""Loss and gradients against TRL 1.16 GRPOTrainer on the same model, rollouts and rewards, with the
shipped GRPO settings (policies/tiny-coder.toml: loss "grpo", scale_rewards "group", clip 0.2,
beta 0, skip_zero_variance on) and a batch that holds a zero-variance group.

TRL's side is TRL's own code end to end except sampling: ``_generate`` is overridden to return the
fixed completions, so TRL computes the rewards (through a reward function), its advantages, the
padded batch and ``compute_loss`` itself. Nothing of TRL is re-implemented here.

The shipped settings depart from TRL in two documented ways, and the test holds each to exactly
what it should change:
- the std epsilon in the advantage: evolve uses verl's 1e-6, TRL hard-codes 1e-4;
- skip_zero_variance (evolve/policy/updater.py): zero-variance groups are dropped before the
  forward, so the "grpo" loss averages over the trained sequences only, where TRL averages over
  all of them. Every gradient is therefore TRL's times n_sequences / n_trained_sequences.
With eps set to TRL's 1e-4, loss and every gradient equal TRL's (scaled by that factor) within
1e-5; at the shipped 1e-6 the advantages differ by no more than the epsilon explains.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from evolve.policy.prompt_sharing import PER_ROW, SHARED_PROMPT
from evolve.policy.spec import PolicySpec
from evolve.policy.updater import Updater
from evolve.rollout import Rollout

REPO = Path(__file__).resolve().parents[2]
G, N_PROMPTS, PROMPT_LEN = 4, 3, 6
COMP_LENS = [12, 5, 9, 1, 7, 12, 3, 10, 4, 8, 6, 2]  # ragged: exercises the completion mask
REWARDS = [1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.25]  # group 1 has zero variance
MAX_LEN = max(COMP_LENS)


def _batch(vocab: int, eos: int, pad: int):
    gen = torch.Generator().manual_seed(7)
    prompts = torch.randint(5, vocab, (N_PROMPTS, PROMPT_LEN), generator=gen)
    completions = []
    for n in COMP_LENS:
        ids = torch.randint(5, vocab, (n,), generator=gen)
        completions.append([int(x) for x in ids if int(x) not in (eos, pad)] or [6])
    return prompts.tolist(), completions


def _trl_loss_and_grads(model, tok, tmp_path, prompts, completions):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    class FixedSamples(GRPOTrainer):
        """TRL as shipped, with sampling replaced by our fixed completions."""

        def _generate(self, prompts_in):
            prompt_ids = [prompts[i // G] for i in range(len(prompts_in))]
            texts = [tok.decode(c) for c in completions]
            return prompt_ids, [list(c) for c in completions], None, texts, None, {}, None, None

    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"), bf16=False, use_cpu=True, report_to=[], loss_type="grpo",
        scale_rewards="group", beta=0.0, epsilon=0.2, num_generations=G, per_device_train_batch_size=N_PROMPTS * G,
        max_completion_length=MAX_LEN, temperature=1.0, logging_steps=1000, seed=0, mask_truncated_completions=False,
    )
    calls = []

    def reward(completions, **kw):  # the rewards, in sample order, through TRL's own reward path
        calls.append(len(completions))
        return list(REWARDS)

    ds = Dataset.from_dict({"prompt": [f"p{i}" for i in range(N_PROMPTS)]})
    trainer = FixedSamples(model=model, reward_funcs=reward, args=args, train_dataset=ds, processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    batch = [{"prompt": f"p{i // G}"} for i in range(N_PROMPTS * G)]
    inputs = trainer._generate_and_score_completions(batch)
    assert calls == [N_PROMPTS * G]
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return float(loss.detach()), grads, inputs["advantages"].detach().clone()


def _ours(model, tok, random_model_dir, prompts, completions, eps: float | None, forward: str = PER_ROW):
    shipped = PolicySpec.from_toml(REPO / "policies" / "tiny-coder.toml").model_dump()
    grpo = {**shipped["grpo"], "micro_batch_size": N_PROMPTS * G}
    if eps is not None:
        grpo["eps"] = eps
    spec = PolicySpec.from_dict({**shipped, "model": str(random_model_dir), "bootstrap": {}, "grpo": grpo})
    assert spec.grpo.skip_zero_variance and spec.grpo.loss_type == "grpo" and spec.grpo.scale_rewards == "group"
    groups = [[Rollout(task_id=f"t{g}", group=g, sample_index=i, prompt_version="p", weights_version="w",
                       messages=[], prompt_text="", completion="", reward=REWARDS[g * G + i], prompt_ids=prompts[g],
                       completion_ids=completions[g * G + i]) for i in range(G)] for g in range(N_PROMPTS)]
    up = Updater(model, spec, tok.pad_token_id)
    up.forward = forward
    prep = up.prepare(groups)
    up.optimizer.zero_grad(set_to_none=True)
    out = up.backward_pass(prep)
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    adv = torch.tensor([r.advantage for grp in groups for r in grp], dtype=torch.float32)
    return out["loss"], grads, adv, spec


@pytest.fixture(scope="module")
def trl_side(random_model_dir, tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(random_model_dir)
    base = AutoModelForCausalLM.from_pretrained(random_model_dir, dtype=torch.float32)
    prompts, completions = _batch(base.config.vocab_size, tok.eos_token_id, tok.pad_token_id)
    loss, grads, adv = _trl_loss_and_grads(copy.deepcopy(base), tok, tmp_path_factory.mktemp("trl"), prompts,
                                           completions)
    return base, tok, prompts, completions, loss, grads, adv


@pytest.mark.parametrize("forward", [PER_ROW, SHARED_PROMPT])
def test_shipped_settings_with_trls_epsilon_match_trl(trl_side, random_model_dir, forward):
    """Both update forwards: every row's own (TRL's layout) and each prompt once (evolve.policy.prompt_sharing)."""
    base, tok, prompts, completions, trl_loss, trl_grads, trl_adv = trl_side
    model = copy.deepcopy(base)
    loss, grads, adv, _ = _ours(model, tok, random_model_dir, prompts, completions, eps=1e-4, forward=forward)
    assert torch.allclose(adv, trl_adv, atol=1e-6), (adv, trl_adv)
    assert (adv[G:2 * G] == 0).all()  # the zero-variance group: skipped by us, zero advantage in TRL
    scale = N_PROMPTS / (N_PROMPTS - 1)  # one of the three groups is skipped (the documented departure)
    assert abs(loss - scale * trl_loss) <= 1e-5, (loss, trl_loss)
    assert set(grads) == set(trl_grads) and len(grads) > 10
    worst = max(float((grads[n] - scale * trl_grads[n]).abs().max()) for n in grads)
    assert worst <= 1e-5, f"max grad difference {worst}"
    assert max(float(g.abs().max()) for g in grads.values()) > 1e-4  # the gradients are not trivially 0


def test_shipped_epsilon_differs_from_trl_only_as_much_as_epsilon_explains(trl_side, random_model_dir):
    base, tok, prompts, completions, trl_loss, _trl_grads, trl_adv = trl_side
    loss, _grads, adv, spec = _ours(copy.deepcopy(base), tok, random_model_dir, prompts, completions, eps=None)
    assert spec.grpo.eps == 1e-6
    # A_ours / A_trl = (std + 1e-4) / (std + 1e-6) per group: a relative change below 1e-4 / std
    mixed = trl_adv != 0
    ratio = adv[mixed] / trl_adv[mixed]
    assert float((ratio - 1).abs().max()) < 1e-3 and float((ratio - 1).min()) > 0  # ours slightly larger
    assert abs(loss - N_PROMPTS / (N_PROMPTS - 1) * trl_loss) <= 1e-3 * abs(trl_loss) + 1e-6, (loss, trl_loss)
