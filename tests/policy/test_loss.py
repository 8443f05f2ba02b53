"""Loss aggregation on hand-computed tiny tensors."""

from __future__ import annotations

import math

import pytest
import torch

from evolve.policy.loss import aggregate, clipped_surrogate, grpo_loss, k3_kl

# Two sequences: lengths 2 and 1 (mask), per-token losses chosen by hand.
PER_TOKEN = torch.tensor([[1.0, 3.0], [5.0, 100.0]])
MASK = torch.tensor([[1, 1], [1, 0]])


def test_aggregations_by_hand():
    assert aggregate(PER_TOKEN, MASK, "grpo").item() == pytest.approx((2.0 + 5.0) / 2)  # seq means, then mean
    assert aggregate(PER_TOKEN, MASK, "bnpo").item() == pytest.approx(9.0 / 3)  # token mean
    assert aggregate(PER_TOKEN, MASK, "dapo", num_items=6).item() == pytest.approx(9.0 / 6)  # whole-batch tokens
    assert aggregate(PER_TOKEN, MASK, "dr_grpo", max_completion_length=4).item() == pytest.approx(9.0 / (2 * 4))
    with pytest.raises(ValueError):
        aggregate(PER_TOKEN, MASK, "dr_grpo")


def test_clipped_surrogate_by_hand():
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))  # ratios 1.5, 0.5, 1.1 against old = 0
    old = torch.zeros(1, 3)
    pos, clip_pos = clipped_surrogate(logp, old, torch.tensor([2.0]), 0.2, 0.3)
    # A>0: min(rA, clip(r)A): 1.5 -> 1.3*2, 0.5 -> 0.5*2, 1.1 -> 1.1*2
    assert pos[0].tolist() == pytest.approx([-2.6, -1.0, -2.2])
    assert clip_pos.tolist() == [[True, False, False]]
    neg, clip_neg = clipped_surrogate(logp, old, torch.tensor([-1.0]), 0.2, 0.3)
    # A<0: min(-r, -clip(r)): 1.5 -> -1.5, 0.5 -> -0.8, 1.1 -> -1.1
    assert neg[0].tolist() == pytest.approx([1.5, 0.8, 1.1])
    assert clip_neg.tolist() == [[False, True, False]]


def test_k3_kl_by_hand():
    logp = torch.tensor([math.log(0.5)])
    ref = torch.tensor([math.log(0.25)])
    # exp(ref - logp) - (ref - logp) - 1 = 0.5 - ln 0.5 - 1
    assert k3_kl(logp, ref).item() == pytest.approx(0.5 + math.log(2) - 1)
    assert k3_kl(ref, ref).item() == 0.0


def test_grpo_loss_with_kl_and_ratio_one():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]], requires_grad=True)
    adv = torch.tensor([1.0, -1.0])
    ref = logp.detach() - 0.1
    out = grpo_loss(logp, logp.detach(), adv, MASK, loss_type="bnpo", beta=0.5, ref_logp=ref)
    kl = math.exp(-0.1) + 0.1 - 1
    # ratio 1: per-token -A + beta*kl; bnpo over 3 tokens: (-1 -1 +1)/3 + 0.5*kl
    assert out.loss.item() == pytest.approx(-1 / 3 + 0.5 * kl, rel=1e-6)
    assert out.kl == pytest.approx(kl, rel=1e-5) and out.clip_fraction == 0.0
    out.loss.backward()
    assert logp.grad is not None and logp.grad[1, 1].item() == 0.0  # masked token gets no gradient
