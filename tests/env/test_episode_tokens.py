"""Multi-turn episodes on the real CI-preset tiny model: the token stream the updater will read.

prompt_ids = the first messages; completion_ids = every later token (policy turns and the
environment's replies as the chat template renders them); completion_mask marks policy tokens;
logprobs align (0.0 on environment tokens); each policy turn's token_span decodes to its text."""

from __future__ import annotations

import pytest

from evolve.env import load_environment
from evolve.env.episode import collect, conversation, verify
from evolve.gym.notes import SEED_INSTRUCTION
from evolve.prompt.candidate import Candidate
from evolve.verification import Verifier


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    from evolve.policy import PolicySpec, load_policy

    spec = PolicySpec.from_dict({"model": str(tiny_model_dir), "threads": 1,
                                 "sampling": {"max_new_tokens": 40}})
    return load_policy(spec)


def test_multi_turn_token_layout(policy):
    env = load_environment("tiny-coder-repair", max_turns=3)
    tasks = env.splits()["heldout"][:4]
    cand = Candidate({"system": SEED_INSTRUCTION})
    with Verifier(None, jobs=2) as v:
        rolls = collect(env, policy, cand, tasks, 3, seed=7, purpose="train", weights_version="", verifier=v)
        verify(v, {t.task_id: t for t in tasks}, rolls, None)
    tok = policy.tokenizer
    multi = 0
    for r in rolls:
        n = len(r.completion_ids)
        assert len(r.completion_mask) == n == len(r.logprobs) and n > 0
        spans = [t.token_span for t in r.turns if t.role == "assistant"]
        # A sample of invalid UTF-8 bytes re-tokenises differently when the conversation is rendered
        # again: the episode re-anchors on the new tokens, and earlier turns become masked context.
        first = next(i for i, sp in enumerate(spans) if sp is not None)
        assert all(sp is None for sp in spans[:first]) and all(sp is not None for sp in spans[first:])
        covered = set()
        for t in (t for t in r.turns if t.role == "assistant" and t.token_span):
            a, b = t.token_span
            assert tok.decode(r.completion_ids[a:b], skip_special_tokens=True) == t.content
            assert r.completion_mask[a:b] == [1] * (b - a)
            covered |= set(range(a, b))
        assert [i for i in range(n) if r.completion_mask[i]] == sorted(covered)
        assert all(r.logprobs[i] == 0.0 for i in range(n) if not r.completion_mask[i])
        assert all(r.logprobs[i] < 0.0 or r.logprobs[i] == 0.0 for i in range(n))
        # the whole stream is the conversation rendered through the template
        text = tok.decode(r.prompt_ids + r.completion_ids)
        for m in conversation(r):
            assert m["content"] in text
        assert r.completion == r.turns[-1].content if r.turns[-1].role == "assistant" else False
        assert all(t.reward is not None for t in r.turns if t.role == "assistant")
        multi += len(spans) > 1 and all(spans)
    assert multi >= 2, "the CI model fails most visible tests: some episodes must get repair turns"
    by_task: dict[str, set] = {}
    for r in rolls:
        by_task.setdefault(r.task_id, set()).add(r.turns[0].observation_hash)
    assert all(len(h) == 1 for h in by_task.values())  # turn 1: one anchor state per task


def test_single_turn_collect_matches_plain_generation(policy):
    """Single-turn: exactly what ``policy.generate`` gave, field by field (the old roll-out path)."""
    env = load_environment("tiny-coder")
    tasks = env.splits()["heldout"][:3]
    cand = Candidate({"system": SEED_INSTRUCTION})
    rolls = collect(env, policy, cand, tasks, 2, seed=5, purpose="heldout", weights_version="w")
    samples = policy.generate([env.first_messages(cand.components, t) for t in tasks], n=2, seed=5)
    flat = [s for g in samples for s in g]
    assert [(r.completion, r.completion_ids, r.logprobs, r.prompt_ids) for r in rolls] == [
        (s.text, s.completion_ids, s.logprobs, s.prompt_ids) for s in flat]
    assert all(r.turns == [] and r.completion_mask == [] for r in rolls)
