"""``sampling.stop``: a completion ends at the first token that completes a stop string, kept in the
completion, on exactly the draws it would have made without the stop (HF backend here; vLLM's engine in
tests/vllm_cpu/test_vllm_backend.py)."""

from __future__ import annotations

import pytest

from evolve.errors import ConfigError, EvolveError
from evolve.gym import load_gym
from evolve.policy import PolicySpec, load_policy
from evolve.policy.stop_rule import StopRule
from evolve.prompt.candidate import render_messages


def first_end_by_scan(tokenizer, ids: list[int], rule: StopRule) -> int | None:
    """The slow reference: decode every prefix in turn."""
    return next((t for t in range(1, len(ids) + 1) if rule.met(tokenizer, ids[:t])), None)


def test_the_rule_ends_at_the_first_token_that_completes_a_stop_string(smollm2_spec):
    from evolve.policy.model_io import load_tokenizer, resolve_model_path

    tok = load_tokenizer(resolve_model_path(smollm2_spec))
    texts = ['Tracing: 7 % 2 == 1.\n<answer>{"odd": true}</answer> and then </answer> again',
             "no tag here at all, only <answer>{}", "```python\nx = 1\n```\nthen <answer>1</answer>", ""]
    rules = [StopRule(strings=("</answer>",)), StopRule(strings=("</answer>", "\nthen")),
             StopRule(code_block=True, strings=("</answer>",))]
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        for rule in rules:
            end = rule.end(tok, ids)
            assert end == first_end_by_scan(tok, ids, rule), (text, rule)
            if end is not None:
                assert rule.met(tok, ids[:end]) and not rule.met(tok, ids[:end - 1])
    tagged = tok(texts[0], add_special_tokens=False)["input_ids"]
    cut = tok.decode(tagged[:StopRule(strings=("</answer>",)).end(tok, tagged)])
    assert cut.count("</answer>") == 1 and "and then" not in cut


def _gym_prompts(n: int):
    return [render_messages({"system": "Write f."}, t) for t in load_gym("train", seed=0, n=n)]


def test_hf_rows_end_at_a_stop_string_on_the_draws_they_would_have_made(random_model_dir):
    sampling = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 24}
    free_policy = load_policy(PolicySpec.from_dict({"model": str(random_model_dir), "sampling": sampling}))
    prompts = _gym_prompts(3)
    free = [s for g in free_policy.generate(prompts, n=4, seed=5) for s in g]
    tok = free_policy.tokenizer
    # a stop string the free draws hold somewhere in the middle of one row: cut there, and in any other
    # row that holds it; rows that never do are untouched
    ids = free[0].completion_ids
    stop = tok.decode(ids[6:8], skip_special_tokens=True).strip() or tok.decode(ids[6:9], skip_special_tokens=True)
    assert stop
    rule = StopRule(strings=(stop,))
    stopped_policy = load_policy(PolicySpec.from_dict(
        {"model": str(random_model_dir), "sampling": {**sampling, "stop": [stop]}}))
    stopped = [s for g in stopped_policy.generate(prompts, n=4, seed=5) for s in g]
    cut = 0
    for f, s in zip(free, stopped, strict=True):
        end = first_end_by_scan(tok, f.completion_ids, rule)
        if end is None or end == len(f.completion_ids):
            assert s.completion_ids == f.completion_ids and s.logprobs == f.logprobs
            continue
        cut += 1
        assert s.completion_ids == f.completion_ids[:end] and s.logprobs == f.logprobs[:end]
        assert stop in s.text and s.finish_reason == "stop" and not s.truncated
    assert cut >= 1


def test_bad_stop_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="empty stop string"):
        PolicySpec.from_dict({"model": "x", "sampling": {"stop": ["</answer>", ""]}})
    from evolve.policy.backends.litellm_backend import LitellmBackend
    from evolve.policy.spec import LitellmSpec, SamplingSpec

    with pytest.raises(EvolveError, match="an API drops the stop string"):
        LitellmBackend(LitellmSpec(model="openai/x"), SamplingSpec(stop=("</answer>",)))
