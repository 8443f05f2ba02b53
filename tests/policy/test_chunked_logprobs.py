"""The update's log-probs on a 152k vocabulary never hold the whole micro-batch's logits at once.

A random Qwen2 with Qwen2.5's vocabulary size (151,936) and a tiny body: every head call's logits
must fit ``LOGITS_BUDGET`` (what one slice may hold), the slices' log-probs and gradients must equal
the single head call's, and small vocabularies must still take the single call (bit-identical runs).
"""

from __future__ import annotations

import pytest
import torch

from evolve.policy import PolicySpec, load_policy
from evolve.policy.chunked_logprobs import LOGITS_BUDGET, body_and_head, chunked_completion_logprobs
from evolve.policy.loss import token_logprobs
from evolve.policy.updater import _Row, collate, completion_logprobs
from evolve.rollout import Rollout

VOCAB = 151_936


@pytest.fixture(scope="module")
def big_vocab_dir(random_model_dir, tmp_path_factory):
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(random_model_dir)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    dest = tmp_path_factory.mktemp("bigvocab") / "model"
    Qwen2ForCausalLM(cfg).save_pretrained(dest)
    tok.save_pretrained(dest)
    return dest


def _batch(rows: int, prompt: int, completion: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(rows):
        p = torch.randint(3, 300, (prompt - i % 3,), generator=g).tolist()  # unequal prompts: left padding
        c = torch.randint(3, 300, (completion - 2 * (i % 2),), generator=g).tolist()
        out.append(_Row(p, c, [], 1.0 if i % 2 else -1.0))
    return out


def _head_spy(model):
    calls = []
    _, head = body_and_head(model)
    handle = head.register_forward_hook(lambda m, i, o: calls.append(tuple(o.shape)))
    return calls, handle


def test_slices_equal_the_single_head_call_in_value_and_gradient(big_vocab_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(big_vocab_dir, dtype=torch.float32)
    prompt, pmask, comp, cmask = collate(_batch(4, 12, 40), pad_id=0)
    ids, attn = torch.cat([prompt, comp], 1), torch.cat([pmask, cmask], 1)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    c = comp.size(1)
    full = token_logprobs(model(input_ids=ids, attention_mask=attn, position_ids=pos,
                                logits_to_keep=c + 1).logits[:, :-1, :], comp, 0.7)
    (full * cmask).sum().backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    budget = 4 * 7 * VOCAB * 4  # 7 positions per slice: 6 slices, the last one short
    got = chunked_completion_logprobs(*body_and_head(model), ids, attn, pos, comp, 0.7, budget=budget)
    (got * cmask).sum().backward()
    torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[n], atol=1e-5, rtol=1e-4, msg=n)


def test_the_update_never_holds_a_micro_batchs_full_vocabulary_logits(big_vocab_dir):
    """8 rows x 64 completion tokens x 151,936 x 4 B = 311 MB of logits if computed at once (over the
    256 MB budget): every head call, forward and the backward's recompute, must stay within it."""
    policy = load_policy(PolicySpec.from_dict({
        "model": str(big_vocab_dir), "finetune": "lora", "lora": {"target_modules": ["q_proj", "v_proj"]},
        "grpo": {"micro_batch_size": 8}, "sampling": {"max_new_tokens": 64}}))
    rows = _batch(8, 10, 64)
    groups = [[Rollout(task_id=f"t{gi}", group=gi, sample_index=i, prompt_version="p", weights_version="w",
                       messages=[], prompt_text="", completion="", reward=float(i % 2), prompt_ids=r.prompt_ids,
                       completion_ids=r.completion_ids, logprobs=[]) for i, r in enumerate(rows[gi * 4:gi * 4 + 4])]
              for gi in range(2)]
    calls, handle = _head_spy(policy.model)
    try:
        stats = policy.update(groups)
    finally:
        handle.remove()
    assert stats.n_trained_groups == 2 and stats.n_tokens == sum(len(r.completion_ids) for r in rows)
    assert len(calls) >= 4  # sliced forward + recomputed in the backward
    assert all(b * t * v * 4 <= LOGITS_BUDGET for b, t, v in calls), calls
    assert sum(t for _, t, _ in calls) >= 2 * 64  # every completion position went through the head


def test_small_vocabularies_keep_the_single_head_call(random_model_dir):
    policy = load_policy(PolicySpec.from_dict({"model": str(random_model_dir)}))
    prompt, pmask, comp, cmask = collate(_batch(4, 6, 20), pad_id=0)
    calls, handle = _head_spy(policy.model)
    try:
        with torch.no_grad():
            completion_logprobs(policy.model, prompt, pmask, comp, cmask, 0.7)
    finally:
        handle.remove()
    assert calls == [(4, comp.size(1) + 1, policy.model.config.vocab_size)]


def test_a_frozen_head_always_gets_a_contiguous_input(big_vocab_dir, random_model_dir):
    """Under LoRA the head is frozen, and torch's matmul then copies its weight once per row for a
    strided input (the prefill's ``hidden[:, -1:, :]``): 8.1 GB per 32-row prefill on the 0.5B.
    Every head call, in generation (prefill and steps) and in the update, must see a contiguous input."""
    from transformers import AutoTokenizer

    policy = load_policy(PolicySpec.from_dict({
        "model": str(big_vocab_dir), "finetune": "lora", "lora": {"target_modules": ["q_proj", "v_proj"]},
        "sampling": {"max_new_tokens": 4}}))
    _, head = body_and_head(policy.model)
    assert not head.weight.requires_grad
    seen = []
    handle = head.register_forward_pre_hook(lambda m, args: seen.append(args[0].is_contiguous()))
    try:
        tok = AutoTokenizer.from_pretrained(random_model_dir)
        msgs = [[{"role": "user", "content": "Write f."}], [{"role": "user", "content": "Write a longer g, please."}]]
        assert len(tok.apply_chat_template(msgs[0], tokenize=True)) > 1
        policy.generate(msgs, n=2, seed=0)
        prompt, pmask, comp, cmask = collate(_batch(4, 6, 20), pad_id=0)
        with torch.no_grad():
            completion_logprobs(policy.model, prompt, pmask, comp, cmask, 0.7)  # the single-call path
    finally:
        handle.remove()
    assert len(seen) >= 3 and all(seen), seen
