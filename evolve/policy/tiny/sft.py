"""Supervised pre-training of the tiny model on the packed teacher corpus."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from evolve.policy.tiny.config import BootstrapConfig


def lr_at(step: int, cfg: BootstrapConfig) -> float:
    """Linear warm-up, then cosine from lr down to min_lr_ratio * lr at the last step."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    t = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


def train(model, data, cfg: BootstrapConfig,
          on_step: Callable[[int, float, float], None] | None = None) -> dict:
    """Train in place on ``data`` = (input_ids, labels, position_ids); returns loss history and timing."""
    import torch
    import torch.nn.functional as F

    ids, labels, pos = data
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))
    gen = torch.Generator().manual_seed(cfg.seed)
    order = torch.randperm(ids.shape[0], generator=gen)
    model.train()
    losses, t0, tokens = [], time.perf_counter(), 0
    for step in range(cfg.steps):
        sel = order[step * cfg.batch_size:(step + 1) * cfg.batch_size]
        x, y, p = ids[sel], labels[sel], pos[sel]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        logits = model(input_ids=x, position_ids=p).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1),
                               ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        losses.append(float(loss.detach()))
        tokens += x.numel()
        if on_step:
            on_step(step, losses[-1], opt.param_groups[0]["lr"])
    model.eval()
    wall = time.perf_counter() - t0
    return {"losses": losses, "train_s": wall, "tokens": tokens, "tokens_per_s": tokens / max(wall, 1e-9),
            "final_loss": sum(losses[-20:]) / len(losses[-20:])}
