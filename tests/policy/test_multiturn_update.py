"""The weight update on multi-turn rollouts: environment tokens masked, per-turn advantages, on a real tiny model.

The slow reference runs one forward per rollout (no batching or padding), reads the log-prob of each
policy token one by one, and builds the clipped loss in plain Python floats from the textbook formula.
"""

from __future__ import annotations

import math

import pytest
import torch

from evolve.policy import PolicySpec, load_policy
from evolve.policy.loss import grpo_loss
from evolve.rollout import Rollout, Turn

EPS_LOW, EPS_HIGH = 0.2, 0.28


def _spec(model_dir, **grpo) -> PolicySpec:
    g = {"old_logprobs": "behaviour", "epsilon_low": EPS_LOW, "epsilon_high": EPS_HIGH, "micro_batch_size": 3, **grpo}
    return PolicySpec.from_dict({"model": str(model_dir), "sampling": {"max_new_tokens": 16}, "seed": 3,
                                 "grpo": g})


def _rollouts(vocab: int, seed: int = 0, multi: bool = True) -> list[list[Rollout]]:
    """2 groups x 3 rollouts; a multi-turn rollout is policy(4-7) env(3-5) policy(2-6) [env policy]."""
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda n: [int(x) for x in torch.randint(5, vocab - 5, (n,), generator=gen)]  # noqa: E731
    groups = []
    for g in range(2):
        prompt = rnd(5 + g)
        group = []
        for i in range(3):
            ids, mask, turns = [], [], []
            for k in range(2 + (i == 2) if multi else 1):
                if k:  # the environment's answer
                    n = int(torch.randint(3, 6, (1,), generator=gen))
                    ids += rnd(n)
                    mask += [0] * n
                    turns.append(Turn("user", "visible tests failed"))
                n = int(torch.randint(2, 8, (1,), generator=gen))
                turns.append(Turn("assistant", f"code {k}", token_span=(len(ids), len(ids) + n),
                                  observation_hash="start" if k == 0 else f"s{(i + k) % 2}"))
                ids += rnd(n)
                mask += [1] * n
            # behaviour log-probs: noisy around a plausible value; absurd on environment tokens
            beh = [(-1e4 if m == 0 else -float(torch.rand(1, generator=gen)) * 8.0) for m in mask]
            group.append(Rollout(task_id=f"t{g}", group=g, sample_index=i, prompt_version="p", weights_version="w",
                                 messages=[], prompt_text="", completion="", reward=float((i + g) % 2 or i == 2),
                                 prompt_ids=prompt, completion_ids=ids, logprobs=beh,
                                 turns=turns if multi else [], completion_mask=mask if multi else []))
        groups.append(group)
    return groups


def _token_adv(r: Rollout) -> list[float]:
    adv = [r.advantage] * len(r.completion_ids)
    for t in r.turns:
        if t.token_span and t.advantage is not None:
            adv[t.token_span[0]:t.token_span[1]] = [t.advantage] * (t.token_span[1] - t.token_span[0])
    return adv


def _slow_loss(model, groups, loss_type: str, max_len: int) -> torch.Tensor:
    rows = [r for g in groups for r in g]
    seq_losses, total, n_tok = [], 0.0, 0
    for r in rows:
        ids = torch.tensor([r.prompt_ids + r.completion_ids])
        logits = model(input_ids=ids).logits[0]
        logp_all = torch.log_softmax(logits.float(), -1)
        adv = _token_adv(r)
        mask = r.completion_mask or [1] * len(r.completion_ids)
        terms = []
        for t, tok in enumerate(r.completion_ids):
            if not mask[t]:
                continue
            lp = logp_all[len(r.prompt_ids) + t - 1, tok]
            ratio = torch.exp(lp - r.logprobs[t])
            clipped = torch.clamp(ratio, 1 - EPS_LOW, 1 + EPS_HIGH)
            terms.append(-torch.min(ratio * adv[t], clipped * adv[t]))
        seq_losses.append(sum(terms) / len(terms))
        total = total + sum(terms)
        n_tok += len(terms)
    if loss_type == "grpo":
        return sum(seq_losses) / len(seq_losses)
    if loss_type == "dapo":
        return total / n_tok
    return total / (len(rows) * max_len)  # dr_grpo


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_masked_multiturn_loss_and_grads_match_slow_reference(random_model_dir, loss_type):
    policy = load_policy(_spec(random_model_dir, advantage="gigpo", loss_type=loss_type, gigpo_gamma=0.8))
    groups = _rollouts(policy.model.config.vocab_size)
    up = policy.updater
    prep = up.prepare(groups)
    assert any(t.advantage != r.advantage for g in groups for r in g for t in r.turns if t.role == "assistant")
    assert prep.n_tokens == sum(sum(r.completion_mask) for g in groups for r in g)  # policy tokens only
    up.optimizer.zero_grad(set_to_none=True)
    out = up.backward_pass(prep)
    got = _grads(policy.model)
    assert math.isfinite(out["loss"])  # the -1e4 behaviour log-probs on environment tokens never enter
    up.optimizer.zero_grad(set_to_none=True)
    want = _slow_loss(policy.model, groups, loss_type, policy.spec.sampling.max_new_tokens)
    want.backward()
    assert out["loss"] == pytest.approx(float(want), rel=1e-5, abs=1e-7)
    ref = _grads(policy.model)
    assert got.keys() == ref.keys()
    for name in got:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-4, atol=1e-6)


def test_environment_tokens_get_exactly_zero_gradient():
    gen = torch.Generator().manual_seed(0)
    logp = (-torch.rand(3, 9, generator=gen) * 5).requires_grad_()
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[0, 2:5] = 0
    mask[1, 6:] = 0
    mask[2, 0] = 0
    old = logp.detach() - 0.3 * torch.randn(3, 9, generator=gen)
    old[mask == 0] = -1e4  # stale / absent old log-probs on environment tokens: exp() would overflow
    ref = logp.detach() + 0.2 * torch.randn(3, 9, generator=gen)
    ref[mask == 0] = 1e4
    adv = torch.randn(3, 9, generator=gen)
    for loss_type in ("grpo", "bnpo", "dapo", "dr_grpo"):
        logp.grad = None
        out = grpo_loss(logp, old, adv, mask, loss_type=loss_type, eps_low=0.2, eps_high=0.28, beta=0.1,
                        ref_logp=ref, max_completion_length=9, num_items=20)
        out.loss.backward()
        assert math.isfinite(float(out.loss)) and math.isfinite(out.kl)
        assert torch.all(logp.grad[mask == 0] == 0), loss_type
        assert torch.all(logp.grad[mask == 1] != 0), loss_type


def test_all_ones_mask_is_bit_identical_to_no_mask(random_model_dir):
    """completion_mask = [1]*n, and turns whose advantage is the rollout's, change nothing, to the bit."""
    results = []
    for variant in ("none", "ones"):
        policy = load_policy(_spec(random_model_dir, beta=0.05, old_logprobs="auto", num_iterations=2))
        groups = _rollouts(policy.model.config.vocab_size, seed=4, multi=False)
        if variant == "ones":
            for r in (r for g in groups for r in g):
                r.completion_mask = [1] * len(r.completion_ids)
        stats = policy.update(groups)
        results.append((stats.loss, stats.kl, stats.n_tokens, {k: v.clone() for k, v in
                                                               policy.model.state_dict().items()}))
    (l0, k0, n0, w0), (l1, k1, n1, w1) = results
    assert (l0, k0, n0) == (l1, k1, n1)
    assert all(torch.equal(w0[k], w1[k]) for k in w0)


def test_gigpo_on_single_turn_rollouts_updates_exactly_as_grpo(random_model_dir):
    weights = []
    for advantage in ("grpo", "gigpo"):
        policy = load_policy(_spec(random_model_dir, advantage=advantage, old_logprobs="auto"))
        policy.update(_rollouts(policy.model.config.vocab_size, seed=2, multi=False))
        weights.append({k: v.clone() for k, v in policy.model.state_dict().items()})
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_bad_mask_or_span_is_one_line_error(random_model_dir):
    from evolve.errors import EvolveError

    policy = load_policy(_spec(random_model_dir, advantage="gigpo"))
    groups = _rollouts(policy.model.config.vocab_size)
    groups[0][0].completion_mask = groups[0][0].completion_mask[:-1]
    with pytest.raises(EvolveError, match="completion_mask has"):
        policy.updater.prepare(groups)
    groups = _rollouts(policy.model.config.vocab_size)
    groups[1][2].turns[0].token_span = (0, 999)
    with pytest.raises(EvolveError, match="token_span"):
        policy.updater.prepare(groups)
