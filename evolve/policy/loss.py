"""GRPO-family loss as pure torch functions (token aggregation exactly as TRL 1.16 GRPOTrainer).

per-token:  l_t = -min(rho_t A, clip(rho_t, 1 - eps_low, 1 + eps_high) A) + beta * KL_t
            rho_t = exp(logp_t - logp_old_t);  KL_t = exp(ref - logp) - (ref - logp) - 1   (k3)
mask:       1 = a trained token; 0 = padding or an environment token of a multi-turn episode
            (no loss, no gradient, not in KL, clip fraction or token counts)
advantages: (B,) one per sequence, or (B, C) one per token (per-turn advantages, e.g. GiGPO)
aggregate:  grpo     mean over each sequence's tokens, then mean over sequences
            bnpo     sum over all tokens / number of tokens (in this micro-batch)
            dapo     sum over all tokens / number of tokens in the WHOLE batch (``num_items``)
            dr_grpo  sum over all tokens / (rows * max_completion_length)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T) gathered at ``targets``; float32 for stable ratios."""
    logits = logits.float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref), unbiased and >= 0 (GRPO paper eq. 4, TRL)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token -min(rho A, clip(rho) A), and a bool mask of tokens where the clip was active."""
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    loss1, loss2 = ratio * adv, clipped * adv
    return -torch.min(loss1, loss2), loss2 < loss1


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, loss_type: str, max_completion_length: int | None = None,
    num_items: float | None = None,
) -> torch.Tensor:
    mask = mask.to(per_token.dtype)
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dapo":
        denom = mask.sum() if num_items is None else torch.tensor(float(num_items))
        return (per_token * mask).sum() / denom.clamp(min=1.0)
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("dr_grpo aggregation needs max_completion_length")
        return (per_token * mask).sum() / (per_token.size(0) * max_completion_length)
    raise ValueError(f"unknown loss_type {loss_type!r}")


@dataclass
class LossOut:
    loss: torch.Tensor  # differentiable scalar
    kl: float  # mean per-token KL (0 when beta == 0)
    clip_fraction: float  # share of masked tokens where the clip was active


def grpo_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
    loss_type: str = "grpo", eps_low: float = 0.2, eps_high: float = 0.2, beta: float = 0.0,
    ref_logp: torch.Tensor | None = None, max_completion_length: int | None = None,
    num_items: float | None = None,
) -> LossOut:
    # Masked tokens (padding, the environment's turns) never enter the loss, but a stale or absent
    # old/ref log-prob there could make exp() overflow, and inf * 0 is nan: pin them to ratio 1, KL 0.
    m = mask.bool()
    old_logp = torch.where(m, old_logp, logp.detach())
    if ref_logp is not None:
        ref_logp = torch.where(m, ref_logp, logp.detach())
    per_token, clip_active = clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high)
    kl_mean = 0.0
    if beta != 0.0:
        if ref_logp is None:
            raise ValueError("beta != 0 needs ref_logp")
        kl = k3_kl(logp, ref_logp)
        per_token = per_token + beta * kl
        kl_mean = float((kl.detach() * mask).sum() / mask.sum().clamp(min=1.0))
    loss = aggregate(per_token, mask, loss_type, max_completion_length, num_items)
    clip_fraction = float(clip_active[m].float().mean()) if m.any() else 0.0
    return LossOut(loss, kl_mean, clip_fraction)
