"""The HF backend's own top-p draw (evolve/policy/nucleus.py) against transformers' warpers.

1. The nucleus is the set transformers' TemperatureLogitsWarper + TopPLogitsWarper keep, on peaked rows
   (one topk call), flat rows (k grows to the whole vocabulary) and mixed batches.
2. Draws follow softmax(logits / T) renormalised over the nucleus (frequencies over 40,000 draws).
3. In the backend: a large vocabulary never reaches transformers' sort-based top-p, the draw is recorded
   in the policy's resolved facts, the recorded log-probs are the sampled tokens' log softmax(logits / T)
   (a teacher-forced forward recomputes them), and a checkpoint keeps the draw its run used.
"""

from __future__ import annotations

import json

import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

import evolve.policy.nucleus as nucleus_mod
from evolve.gym import load_gym
from evolve.policy import PolicySpec, load_policy
from evolve.policy.nucleus import SAMPLER, TRANSFORMERS, nucleus, nucleus_draw
from evolve.prompt.candidate import render_messages


def _transformers_kept(logits, temperature, top_p):
    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return [set(torch.isfinite(row).nonzero().flatten().tolist()) for row in scores]


def _ours_kept(logits, temperature, top_p):
    index, _, keep = nucleus(torch.log_softmax(logits / temperature, -1), top_p)
    return [set(i[k].tolist()) for i, k in zip(index, keep, strict=True)]


@pytest.mark.parametrize("temperature", [0.7, 1.3])
@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95, 1.0])
def test_the_nucleus_is_the_set_transformers_keeps(temperature, top_p):
    gen = torch.Generator().manual_seed(0)
    peaked = torch.randn(6, 5000, generator=gen) * 6  # a few tokens hold the mass: one topk call
    flat = torch.randn(3, 5000, generator=gen) * 0.05  # the nucleus is most of the vocabulary: k grows
    for logits in (peaked, flat, torch.cat([peaked, flat])):
        assert _ours_kept(logits, temperature, top_p) == _transformers_kept(logits, temperature, top_p)
    sizes = [len(s) for s in _ours_kept(flat, temperature, top_p)]
    assert min(sizes) > nucleus_mod.FIRST_K  # the flat rows did go past the first topk


def test_draws_follow_the_renormalised_nucleus():
    torch.manual_seed(1)
    row = torch.tensor([4.0, 3.5, 3.0, 2.0, 1.0, 0.0, -1.0, -3.0] + [-6.0] * 200)
    draws = nucleus_draw(torch.log_softmax(row / 0.8, -1).expand(40_000, -1), 0.9)
    kept = _transformers_kept(row[None], 0.8, 0.9)[0]
    want = torch.softmax(row / 0.8, -1)
    want = torch.where(torch.isin(torch.arange(len(row)), torch.tensor(sorted(kept))), want, 0.0)
    want = want / want.sum()
    got = torch.bincount(draws, minlength=len(row)).double() / len(draws)
    assert set(draws.unique().tolist()) <= kept
    se = (want * (1 - want) / len(draws)).sqrt()
    assert bool(((got - want).abs() <= 5 * se + 1e-9).all()), (got[:8], want[:8])


def _prompts(n: int):
    return [render_messages({"system": "Write f."}, t) for t in load_gym("train", seed=0, n=n)]


@pytest.fixture
def nucleus_policy(random_model_dir, monkeypatch):
    """The tests' random model (a 320-token vocabulary) with the threshold lowered, so it draws as a large
    vocabulary does; transformers' top-p raises if anything reaches it."""
    monkeypatch.setattr(nucleus_mod, "NUCLEUS_MIN_VOCAB", 0)

    def refuse(self, input_ids, scores):
        raise AssertionError("transformers' sort-based top-p was called")

    monkeypatch.setattr(TopPLogitsWarper, "__call__", refuse)
    spec = PolicySpec.from_dict({"model": str(random_model_dir), "finetune": "full",
                                 "sampling": {"temperature": 0.9, "top_p": 0.8, "max_new_tokens": 12}})
    return load_policy(spec)


def test_a_large_vocabulary_draws_without_transformers_top_p(nucleus_policy):
    assert nucleus_policy.resolved["sampler"] == SAMPLER
    config = nucleus_policy.model.generation_config  # a hub config's own sampling (Qwen's: top-k 20) is not used
    config.do_sample, config.top_k, config.temperature = True, 1, 0.05
    a = nucleus_policy.generate(_prompts(3), n=3, seed=5)
    b = nucleus_policy.generate(_prompts(3), n=3, seed=5)
    assert [s.completion_ids for g in a for s in g] == [s.completion_ids for g in b for s in g]  # seeded
    assert len({tuple(s.completion_ids) for g in a for s in g}) > 1


def _teacher_forced_logits(model, sample):
    """The raw logits at each of ``sample``'s completion steps, from one forward over prompt + completion."""
    ids = torch.tensor([sample.prompt_ids + sample.completion_ids])
    with torch.no_grad():
        return model(input_ids=ids).logits[0, len(sample.prompt_ids) - 1:-1].float()


def test_recorded_logprobs_are_the_sampled_tokens_tempered_log_softmax(nucleus_policy):
    temperature = nucleus_policy.spec.sampling.temperature
    for sample in [s for g in nucleus_policy.generate(_prompts(2), n=2, seed=3) for s in g]:
        logits = _teacher_forced_logits(nucleus_policy.model, sample)
        want = torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(sample.completion_ids)[:, None])
        assert torch.allclose(torch.tensor(sample.logprobs), want.squeeze(-1), atol=1e-4)


def _sorted_kept(logits, temperature, top_p):
    """The slow reference: sort each row, keep a token while the mass ranked above it is below top_p."""
    probs, order = torch.softmax(logits / temperature, -1).sort(-1, descending=True)
    above = torch.cumsum(probs, -1) - probs
    return [set(o[a < top_p].tolist()) for o, a in zip(order, above, strict=True)]


@pytest.mark.parametrize("temperature, top_p", [(0.3, 0.5), (1.6, 0.7)])
def test_every_sampled_token_is_in_the_specs_nucleus(nucleus_policy, random_model_dir, temperature, top_p):
    """The backend draws with the spec's temperature and top-p: each sampled token is in the nucleus those
    values define (by a full sort: the fixture bars transformers' warper), from a teacher-forced forward."""
    spec = PolicySpec.from_dict({"model": str(random_model_dir), "finetune": "full", "sampling": {
        "temperature": temperature, "top_p": top_p, "max_new_tokens": 12}})
    policy = load_policy(spec)  # with nucleus_policy's patches: NucleusSampler draws, transformers' top-p raises
    assert policy.resolved["sampler"] == SAMPLER
    checked = 0
    for sample in [s for g in policy.generate(_prompts(2), n=2, seed=7) for s in g]:
        kept = _sorted_kept(_teacher_forced_logits(policy.model, sample), temperature, top_p)
        assert all(t in k for t, k in zip(sample.completion_ids, kept, strict=True))
        checked += len(sample.completion_ids)
    assert checked >= 24


def test_a_checkpoint_keeps_the_draw_its_run_used(nucleus_policy, tmp_path, monkeypatch):
    ckpt = nucleus_policy.save(tmp_path / "ckpt")
    spec = nucleus_policy.spec
    monkeypatch.setattr(nucleus_mod, "NUCLEUS_MIN_VOCAB", 10**9)  # a fresh load would now pick transformers'
    assert load_policy(spec).resolved["sampler"] == TRANSFORMERS
    assert load_policy(spec, checkpoint_dir=ckpt).resolved["sampler"] == SAMPLER
    meta_path = ckpt / "policy.json"
    meta = json.loads(meta_path.read_text())
    del meta["resolved"]["sampler"]  # as an evolve from before the choice wrote it
    meta_path.write_text(json.dumps(meta))
    monkeypatch.setattr(nucleus_mod, "NUCLEUS_MIN_VOCAB", 0)
    assert load_policy(spec, checkpoint_dir=ckpt).resolved["sampler"] == TRANSFORMERS


def test_real_vocabularies_pick_the_draw(smollm2_spec, tiny_model_dir):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    assert load_policy(smollm2_spec).resolved["sampler"] == SAMPLER  # 49,152 tokens
    tiny = load_policy(PolicySpec.from_toml(repo / "policies" / "tiny-coder-ci.toml"))
    assert tiny.resolved["sampler"] == TRANSFORMERS  # the embedded model's recorded runs stay reproducible
