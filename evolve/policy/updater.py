"""GRPO-family weight update on rollouts the loop already owns.

Departures from the papers / TRL, on purpose:
- Groups whose advantages are all zero (zero variance under grpo/dr_grpo; all-correct under ngrpo)
  are dropped before the forward pass (`skip_zero_variance`): they add nothing to the gradient,
  but TRL still counts them in its loss denominators, so our per-step loss scale is that of the
  informative groups only (as verl's dynamic sampling filter / DAPO do).
- Old-policy log-probs: with num_iterations == 1 the ratio is exactly 1 at the only step, so we
  use the current log-probs detached (as TRL does when generation and optimisation are aligned).
  With num_iterations > 1 we recompute them once, before the first inner step, with a no-grad
  forward in the training precision and layout (as TRL does), instead of trusting the sampler's
  log-probs, which differ by KV-cache/padding numerics (and by engine, with vLLM). The gap between
  the two is reported as `logprob_gap`. `grpo.old_logprobs = "behaviour"` uses the sampler's
  log-probs instead (PPO proper for stale rollouts; the clip then also bounds the sampler mismatch,
  a simpler stand-in for TRL's truncated importance-sampling correction under vLLM).
- A completion trained under another prompt than it was sampled with (``Rollout.sampled_prompt_ids``,
  evolve/loop/recontext.py) takes pi_old from a no-grad forward under its sampling prompt, before the
  first inner step: the ratio is then the importance weight between the two contexts (the clip bounds it).
- Positions: we pass position_ids from the attention mask, so left-padded prompts get the same
  rotary positions as during generation (TRL 1.16 leaves them implicit).
- Multi-turn rollouts (``evolve.policy.turns``): the environment's tokens stay in the input (the
  policy attends to them) but are masked out of the loss, KL, clip fraction and token counts;
  per-turn advantages (GiGPO) apply to their turn's tokens. dr_grpo's constant L stays
  ``sampling.max_new_tokens`` (a per-turn cap) for multi-turn rollouts too: only its constancy
  matters for the length-bias argument.
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from itertools import accumulate

import numpy as np
import torch

from evolve.errors import EvolveError
from evolve.policy.advantages import get_estimator
from evolve.policy.chunked_logprobs import LOGITS_BUDGET, body_and_head, chunked_completion_logprobs
from evolve.policy.loss import grpo_loss, token_logprobs
from evolve.policy.prompt_sharing import SHARED_PROMPT, PromptSharing, default_update_forward
from evolve.policy.spec import OptimizerSpec, PolicySpec
from evolve.policy.stats import UpdateStats
from evolve.policy.turns import assign_group, policy_mask, token_advantages
from evolve.rollout import Rollout


def make_optimizer(params, opt: OptimizerSpec):
    optimizer = torch.optim.AdamW(params, lr=opt.lr, betas=tuple(opt.betas), eps=opt.eps,
                                  weight_decay=opt.weight_decay)

    def factor(step: int) -> float:
        if opt.warmup_steps and step < opt.warmup_steps:
            return (step + 1) / opt.warmup_steps
        if opt.scheduler == "constant":
            return 1.0
        progress = min(1.0, (step - opt.warmup_steps) / max(1, opt.total_steps - opt.warmup_steps))
        if opt.scheduler == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@dataclass
class _Row:
    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour: list[float]
    advantage: float
    mask: list[int] = field(default_factory=list)  # 1 = policy token (trained), 0 = environment; [] = all 1
    token_advantages: list[float] | None = None  # per token when turns carry their own advantage
    sampled_prompt_ids: list[int] | None = None  # sampled under this prompt, trained under prompt_ids


@dataclass
class _Prepared:
    batches: list[list[_Row]]
    tensors: list[tuple]
    masks: list[torch.Tensor]  # loss masks: completion mask x policy-token mask
    info: dict
    n_tokens: int
    old: list | None = None
    old_rows: list | None = None  # per micro-batch, (B,) rows ``old`` applies to; None = every row
    ref: list | None = None

    @property
    def prompts(self) -> list[list[int]]:
        return [r.prompt_ids for b in self.batches for r in b]

    @property
    def starts(self) -> list[int]:
        """The index of each micro-batch's first row."""
        return list(accumulate((len(b) for b in self.batches[:-1]), initial=0)) if self.batches else []


def collate(rows: list[_Row], pad_id: int):
    """Prompt left-padded, completion right-padded (TRL's layout), plus masks and position ids."""
    pw = max(len(r.prompt_ids) for r in rows)
    cw = max(len(r.completion_ids) for r in rows)
    n = len(rows)
    prompt = torch.full((n, pw), pad_id, dtype=torch.long)
    pmask = torch.zeros((n, pw), dtype=torch.long)
    comp = torch.full((n, cw), pad_id, dtype=torch.long)
    cmask = torch.zeros((n, cw), dtype=torch.long)
    for i, r in enumerate(rows):
        prompt[i, pw - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
        pmask[i, pw - len(r.prompt_ids):] = 1
        comp[i, :len(r.completion_ids)] = torch.tensor(r.completion_ids)
        cmask[i, :len(r.completion_ids)] = 1
    return prompt, pmask, comp, cmask


def completion_logprobs(model, prompt, pmask, comp, cmask, temperature: float) -> torch.Tensor:
    """log pi(completion token | prefix) at temperature T, shape (B, C)."""
    ids = torch.cat([prompt, comp], dim=1)
    attn = torch.cat([pmask, cmask], dim=1)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    c = comp.size(1)
    split = body_and_head(model)
    if split is not None and ids.size(0) * c * split[1].weight.shape[0] * 4 > LOGITS_BUDGET:
        # A 152k vocabulary: the head runs slice by slice (evolve.policy.chunked_logprobs).
        return chunked_completion_logprobs(*split, ids, attn, pos, comp, temperature)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, logits_to_keep=c + 1).logits
    return token_logprobs(logits[:, :-1, :], comp, temperature)


def loss_mask(rows: list[_Row], cmask: torch.Tensor) -> torch.Tensor:
    """The completion (padding) mask times each row's policy-token mask."""
    if all(all(r.mask) for r in rows):
        return cmask
    policy = torch.zeros_like(cmask)
    for i, r in enumerate(rows):
        n = len(r.completion_ids)
        policy[i, :n] = torch.tensor(r.mask, dtype=cmask.dtype) if r.mask else 1
    return cmask * policy


def row_advantages(rows: list[_Row], width: int) -> torch.Tensor:
    """(B,) scalar advantages, or (B, C) when some row has per-turn advantages."""
    if all(r.token_advantages is None for r in rows):
        return torch.tensor([r.advantage for r in rows], dtype=torch.float32)
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, :len(r.completion_ids)] = torch.tensor(
            r.advantage if r.token_advantages is None else r.token_advantages, dtype=torch.float32)
    return out


class Updater:
    def __init__(self, model, spec: PolicySpec, pad_id: int, reference=None):
        self.model = model
        self.spec = spec
        self.pad_id = pad_id
        self.reference = reference  # frozen base for full FT; None with LoRA (adapter disabled instead)
        g = spec.grpo
        params = {"grpo": {"eps": g.eps, "scale": g.scale_rewards == "group"}, "dr_grpo": {},
                  "ngrpo": {"r_max": g.ngrpo_r_max, "m": g.ngrpo_m, "eps": g.eps},
                  "gigpo": {"omega": g.gigpo_omega, "gamma": g.gigpo_gamma, "eps": g.eps,
                            "scale": g.scale_rewards == "group", "step_rewards": g.gigpo_step_rewards}}[g.advantage]
        self.estimator = get_estimator(g.advantage, **params)
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer, self.scheduler = make_optimizer(trainable, spec.optimizer)
        self.step = 0  # optimizer steps taken
        # evolve.policy.prompt_sharing; load_policy replaces it with the one a checkpoint recorded
        self.forward = default_update_forward(model)

    # -- advantages -----------------------------------------------------------------------------
    def assign_advantages(self, groups: list[list[Rollout]]) -> tuple[list[_Row], dict]:
        rows, zero_var, all_fail, trained, adv_abs = [], 0, 0, 0, []
        for group in groups:
            rewards = np.array([r.reward for r in group], dtype=np.float64)
            adv = assign_group(group, self.estimator)  # rollout (and per-turn) advantages
            zero_var += bool(np.all(rewards == rewards[0]))
            all_fail += bool(np.all(rewards <= 0))
            adv_abs.extend(abs(float(r.advantage)) for r in group)
            if self.spec.grpo.skip_zero_variance and np.all(np.abs(adv) < 1e-12):
                continue
            trained += 1
            for r in group:
                if not r.completion_ids:
                    raise EvolveError(f"rollout {r.task_id}#{r.sample_index} has no token ids; "
                                      "this backend's samples cannot train weights")
                rows.append(_Row(list(r.prompt_ids), list(r.completion_ids), list(r.logprobs), float(r.advantage),
                                 policy_mask(r), token_advantages(r), list(r.sampled_prompt_ids) or None))
        n = max(1, len(groups))
        info = {"zero_variance_fraction": zero_var / n, "all_fail_fraction": all_fail / n,
                "n_trained_groups": trained, "mean_advantage_abs": float(np.mean(adv_abs)) if adv_abs else 0.0}
        return rows, info

    # -- the update -----------------------------------------------------------------------------
    def prepare(self, groups: list[list[Rollout]]) -> _Prepared:
        """Advantages (set on each rollout), micro-batches, and the fixed old/ref log-probs."""
        rows, info = self.assign_advantages(groups)
        mb = self.spec.grpo.micro_batch_size
        batches = [rows[i:i + mb] for i in range(0, len(rows), mb)]
        device = next(self.model.parameters()).device  # CUDA when the policy lives there
        tensors = [tuple(x.to(device) for x in collate(b, self.pad_id)) for b in batches]
        masks = [loss_mask(b, t[3]) for b, t in zip(batches, tensors, strict=True)]
        prep = _Prepared(batches, tensors, masks, info, n_tokens=int(sum(int(m.sum()) for m in masks)))
        if rows:
            self.model.train()
            if self.spec.grpo.old_logprobs == "behaviour":
                prep.old = [self._behaviour_logprobs(b, t[2]).to(device) for b, t in zip(batches, tensors, strict=True)]
            else:
                if self.spec.grpo.num_iterations > 1:
                    prep.old = self._old_logprobs(prep)
                if any(r.sampled_prompt_ids for r in rows):
                    self._sampled_context_old(prep)
            prep.ref = self._ref_logprobs(prep) if self.spec.grpo.beta != 0.0 else None
        return prep

    def backward_pass(self, prep: _Prepared) -> dict:
        """One inner epoch: forward + backward over every micro-batch (gradients accumulate)."""
        losses, kls, clips, gaps = [], [], [], []
        n = len(prep.batches)
        logprobs = self._logprobs_fn(self.model, prep)
        for k, (batch, t, start) in enumerate(zip(prep.batches, prep.tensors, prep.starts, strict=True)):
            logp = logprobs(start, t)
            old = prep.old[k] if prep.old else None
            if old is not None and prep.old_rows is not None:  # the other rows are on-policy
                old = torch.where(prep.old_rows[k][:, None], old, logp.detach())
            out, gap = self._micro_step(batch, logp, prep.masks[k], old, prep.ref[k] if prep.ref else None, n,
                                        prep.n_tokens)
            logprobs.release(start + len(batch))  # shared prompts: the finished ones' own backward
            losses.append(float(out.loss))
            kls.append(out.kl)
            clips.append(out.clip_fraction)
            if gap is not None:
                gaps.append(gap)
        return {"loss": float(np.sum(losses)), "kl": float(np.mean(kls)), "clip_fraction": float(np.mean(clips)),
                "logprob_gap": float(np.mean(gaps)) if gaps else 0.0}

    def update(self, groups: list[list[Rollout]]) -> UpdateStats:
        t0 = time.perf_counter()
        prep = self.prepare(groups)
        stats = UpdateStats(n_groups=len(groups), lr=self.scheduler.get_last_lr()[0], n_tokens=prep.n_tokens,
                            **prep.info)
        if not prep.batches:
            stats.seconds = time.perf_counter() - t0
            return stats
        epochs, norms = [], []
        for _ in range(self.spec.grpo.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            epochs.append(self.backward_pass(prep))
            norms.append(self._optimizer_step())
        for key in ("loss", "kl", "clip_fraction", "logprob_gap"):
            setattr(stats, key, float(np.mean([e[key] for e in epochs])))
        stats.grad_norm = float(np.mean(norms))
        stats.optimizer_steps = len(epochs)
        stats.seconds = time.perf_counter() - t0
        return stats

    def _logprobs_fn(self, model, prep: _Prepared) -> _PerRow | _Shared:
        """This updater's forward: (micro-batch start row, collated tensors) -> (B, C) completion log-probs."""
        t = self.spec.sampling.temperature
        if self.forward == SHARED_PROMPT:
            return _Shared(PromptSharing(model, prep.prompts, t))
        return _PerRow(model, t)

    def _micro_step(self, batch, logp, mask, old, ref, n_micro: int, n_tokens: int):
        g = self.spec.grpo
        adv = row_advantages(batch, logp.shape[1]).to(logp.device)
        gap = None
        if all(len(r.behaviour) == len(r.completion_ids) for r in batch):
            beh = torch.zeros_like(logp)
            for i, r in enumerate(batch):
                beh[i, :len(r.behaviour)] = torch.tensor(r.behaviour)
            m = mask.bool()
            gap = float((logp.detach() - beh).abs()[m].mean()) if m.any() else 0.0
        out = grpo_loss(
            logp, logp.detach() if old is None else old, adv, mask, loss_type=g.loss_type,
            eps_low=g.epsilon_low, eps_high=g.epsilon_high, beta=g.beta, ref_logp=ref,
            max_completion_length=self.spec.sampling.max_new_tokens, num_items=n_tokens,
        )
        # Gradient accumulation: average micro-batches (TRL divides by the accumulation steps),
        # except dapo, whose denominator already spans the whole batch.
        scale = 1.0 if g.loss_type == "dapo" else 1.0 / n_micro
        (out.loss * scale).backward()
        out.loss = out.loss.detach() * scale
        return out, gap

    @staticmethod
    def _behaviour_logprobs(batch: list[_Row], comp: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(comp.shape, dtype=torch.float32)
        for i, r in enumerate(batch):
            if len(r.behaviour) != len(r.completion_ids):
                raise EvolveError("old_logprobs = 'behaviour' needs the sampler's log-probs on every rollout")
            out[i, :len(r.behaviour)] = torch.tensor(r.behaviour, dtype=torch.float32)
        return out

    @torch.no_grad()
    def _all_logprobs(self, model, prep: _Prepared) -> list[torch.Tensor]:
        logprobs = self._logprobs_fn(model, prep)
        out = []
        for start, x, batch in zip(prep.starts, prep.tensors, prep.batches, strict=True):
            out.append(logprobs(start, x))
            logprobs.release(start + len(batch))
        return out

    def _old_logprobs(self, prep: _Prepared):
        return self._all_logprobs(self.model, prep)

    @torch.no_grad()
    def _sampled_context_old(self, prep: _Prepared) -> None:
        """pi_old of each re-rendered row (``sampled_prompt_ids``) under the prompt it was sampled with, by this
        model before the first inner step, so the ratio is pi_theta(y | trained prompt) / pi_old(y | sampled
        prompt): the importance weight, bounded by the clip. From the trainer, not the sampler: vLLM's
        log-probs are those of the top-p-renormalised distribution (vllm_backend) and would bias the ratio
        by the nucleus mass; the trainer's are the full distribution under both prompts, as the HF sampler's."""
        t = self.spec.sampling.temperature
        olds, flags = [], []
        for k, (batch, x) in enumerate(zip(prep.batches, prep.tensors, strict=True)):
            device = x[2].device
            idx = [i for i, r in enumerate(batch) if r.sampled_prompt_ids]
            old = prep.old[k].clone() if prep.old else torch.zeros(x[2].shape, dtype=torch.float32, device=device)
            if idx:
                sub = [replace(batch[i], prompt_ids=batch[i].sampled_prompt_ids or []) for i in idx]
                prompt, pmask, comp, cmask = (y.to(device) for y in collate(sub, self.pad_id))
                lp = completion_logprobs(self.model, prompt, pmask, comp, cmask, t)
                old[idx, :lp.shape[1]] = lp.float()
            olds.append(old)
            flags.append(torch.tensor([bool(r.sampled_prompt_ids) for r in batch], device=device))
        prep.old = olds
        prep.old_rows = None if self.spec.grpo.num_iterations > 1 else flags

    def _ref_logprobs(self, prep: _Prepared):
        if self.reference is not None:
            return self._all_logprobs(self.reference, prep)
        ctx = self.model.disable_adapter() if hasattr(self.model, "disable_adapter") else nullcontext()
        with ctx:  # LoRA: the reference is the base model, i.e. the adapter switched off
            return self._all_logprobs(self.model, prep)

    def _optimizer_step(self) -> float:
        params = [p for p in self.model.parameters() if p.requires_grad and p.grad is not None]
        clip = self.spec.optimizer.grad_clip
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return float(norm)

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])


@dataclass
class _PerRow:
    """Every row's own forward (TRL's layout); nothing is kept between micro-batches."""

    model: torch.nn.Module
    temperature: float

    def __call__(self, start: int, x: tuple) -> torch.Tensor:
        return completion_logprobs(self.model, x[0], x[1], x[2], x[3], self.temperature)

    def release(self, done: int) -> None:
        pass


@dataclass
class _Shared:
    """Each prompt forwarded once (evolve.policy.prompt_sharing); ``release`` runs the finished prompts' backward."""

    sharing: PromptSharing

    def __call__(self, start: int, x: tuple) -> torch.Tensor:
        return self.sharing.logprobs(start, x[2], x[3])

    def release(self, done: int) -> None:
        self.sharing.release(done)
