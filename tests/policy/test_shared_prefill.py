"""The HF backend's shared prompt prefill (evolve/policy/backends/hf.py): a task's n samples cost one forward
of its prompt, they draw what the batch path draws (same seed: the same tokens up to float rounding, log-probs
within 1e-3), the choice is recorded per checkpoint, and a checkpoint recording none keeps the batch path."""

from __future__ import annotations

import json

import pytest
import torch
from token_counter import TokenCounter

import evolve.policy.backends.hf as hf_mod
from evolve.gym import load_gym
from evolve.policy import PolicySpec, load_policy
from evolve.policy.backends.hf import BATCH, SHARED_PROMPT
from evolve.prompt.candidate import render_messages


def _prompts(n: int):
    return [render_messages({"system": "Write f."}, t) for t in load_gym("train", seed=0, n=n)]


def _agree(batch, shared) -> int:
    """Rows of both paths agree on a common prefix of >= 1 token with log-probs within 1e-3; returns the
    number of tokens compared (where float rounding flips a draw, the rows part there)."""
    compared = 0
    for group_b, group_s in zip(batch, shared, strict=True):
        for b, s in zip(group_b, group_s, strict=True):
            assert b.prompt_ids == s.prompt_ids
            same = 0
            for tb, ts in zip(b.completion_ids, s.completion_ids, strict=False):
                if tb != ts:
                    break
                same += 1
            assert same >= 1, (b.completion_ids[:4], s.completion_ids[:4])
            gap = max(abs(x - y) for x, y in zip(b.logprobs[:same], s.logprobs[:same], strict=True))
            assert gap < 1e-3, gap
            compared += same
    return compared


@pytest.fixture
def shared_policy(random_model_dir, monkeypatch):
    """The tests' random model with the size threshold lowered, so a fresh policy shares its prompts."""
    monkeypatch.setattr(hf_mod, "SHARED_PREFILL_MIN_PARAMS", 0)
    spec = PolicySpec.from_dict({"model": str(random_model_dir), "finetune": "full",
                                 "sampling": {"temperature": 0.9, "top_p": 0.9, "max_new_tokens": 10}})
    return load_policy(spec)


def test_each_prompt_is_computed_once_and_the_draws_match_the_batch_path(shared_policy):
    backend, prompts, n = shared_policy.backend, _prompts(3), 4
    assert shared_policy.resolved["prefill"] == SHARED_PROMPT
    counter = TokenCounter(backend.model)
    out = {}
    for mode in (BATCH, SHARED_PROMPT):
        backend.prefill = mode
        counter.tokens = 0
        out[mode] = (backend.generate(prompts, n=n, seed=7), counter.tokens)
    (batch, batch_tokens), (shared, shared_tokens) = out[BATCH], out[SHARED_PROMPT]
    assert _agree(batch, shared) >= len(prompts) * n
    width = max(len(g[0].prompt_ids) for g in batch)  # left-padded to the longest prompt
    # the batch path embeds every row's padded prompt; the shared one each distinct prompt once
    assert batch_tokens - shared_tokens == (n - 1) * len(prompts) * (width - 1)


def test_a_checkpoint_keeps_the_prefill_its_run_used(shared_policy, tmp_path, monkeypatch):
    ckpt = shared_policy.save(tmp_path / "ckpt")
    spec = shared_policy.spec
    monkeypatch.setattr(hf_mod, "SHARED_PREFILL_MIN_PARAMS", 10**12)  # a fresh load would now pick batch
    assert load_policy(spec).resolved["prefill"] == BATCH
    assert load_policy(spec, checkpoint_dir=ckpt).backend.prefill == SHARED_PROMPT
    meta_path = ckpt / "policy.json"
    meta = json.loads(meta_path.read_text())
    del meta["resolved"]["prefill"]  # as an evolve from before the choice wrote it
    meta_path.write_text(json.dumps(meta))
    monkeypatch.setattr(hf_mod, "SHARED_PREFILL_MIN_PARAMS", 0)
    assert load_policy(spec, checkpoint_dir=ckpt).backend.prefill == BATCH


@pytest.mark.slow
def test_on_a_real_model_the_shared_prefill_draws_what_the_batch_path_draws(smollm2_spec):
    """SmolLM2-135M (the size rule picks the shared prefill); the embedded tiny model keeps the batch path."""
    torch.set_num_threads(1)
    spec = smollm2_spec.model_copy(update={"sampling": smollm2_spec.sampling.model_copy(
        update={"max_new_tokens": 6})})
    policy = load_policy(spec)
    assert policy.resolved["prefill"] == SHARED_PROMPT
    prompts, backend = _prompts(2), policy.backend
    shared = backend.generate(prompts, n=3, seed=11)
    backend.prefill = BATCH
    batch = backend.generate(prompts, n=3, seed=11)
    assert _agree(batch, shared) >= 6


def test_the_embedded_model_keeps_the_batch_path(tiny_model_dir):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    tiny = load_policy(PolicySpec.from_toml(repo / "policies" / "tiny-coder-ci.toml"))
    assert tiny.resolved["prefill"] == BATCH  # its recorded runs and the gym's figures stay reproducible
