"""The litellm backend against a tiny local OpenAI-compatible HTTP server (127.0.0.1 only)."""

from __future__ import annotations

import pytest
from fake_openai import FakeOpenAI

from evolve.errors import EvolveError
from evolve.policy import FROZEN_MESSAGE, PolicySpec, load_policy


def echo(body):
    """At most 3 choices per call (the backend must ask again); odd ones are truncated."""
    last = body["messages"][-1]["content"]
    return [(f"def f(xs):\n    return {i}  # {last}", "stop" if i % 2 == 0 else "length")
            for i in range(min(int(body.get("n") or 1), 3))]


@pytest.fixture(scope="module")
def fake():
    s = FakeOpenAI(echo)
    yield s
    s.stop()


@pytest.fixture
def server(fake):
    return fake.url


def test_litellm_generates_text_and_cannot_update(fake, server, tmp_path):
    spec = PolicySpec.from_dict({"backend": "litellm", "model": "api",
                                 "litellm": {"model": "openai/local-model", "api_base": server},
                                 "sampling": {"temperature": 0.5, "max_new_tokens": 64}})
    policy = load_policy(spec)
    assert policy.can_update is False
    prompts = [[{"role": "system", "content": "Write Python."}, {"role": "user", "content": "task A"}],
               [{"role": "user", "content": "task B"}]]
    out = policy.generate(prompts, n=4, seed=5)
    assert [len(g) for g in out] == [4, 4]
    assert out[0][0].text.endswith("# task A") and out[1][3].text.endswith("# task B")
    assert out[0][1].truncated and not out[0][0].truncated
    assert out[0][0].completion_ids == [] and out[0][0].logprobs == []
    sent = fake.requests[0]
    assert sent["path"].endswith("/chat/completions") and sent["model"] == "local-model"
    assert sent["n"] == 4 and sent["temperature"] == 0.5 and sent["max_tokens"] == 64 and sent["seed"] == 5
    assert sent["messages"] == prompts[0]
    with pytest.raises(EvolveError, match="weights frozen: the litellm backend cannot be trained"):
        policy.update([])
    assert FROZEN_MESSAGE.startswith("weights frozen")
    # Its checkpoint has no weights but keeps the sampler state, so the loop can save/resume it.
    d = policy.save(tmp_path / "api")
    again = load_policy(spec, checkpoint_dir=d)
    assert again.generate_calls == 1 and again.weights_hash() == policy.weights_hash()


def test_unreachable_server_is_a_clear_error():
    spec = PolicySpec.from_dict({"backend": "litellm", "litellm": {"model": "openai/x", "num_retries": 0,
                                                                   "api_base": "http://127.0.0.1:9/v1", "timeout": 5}})
    with pytest.raises(EvolveError, match="litellm backend openai/x"):
        load_policy(spec).generate([[{"role": "user", "content": "hi"}]], n=1, seed=0)


@pytest.mark.parametrize("status,requests", [(500, 2), (400, 1)])
def test_num_retries_counts_requests_and_only_transient_errors_are_retried(status, requests):
    """``num_retries = 1`` is at most two requests, and a 400 (which cannot succeed) is sent once:
    evolve/util/retry.py, not litellm's own retries (which sent 3 and 2 here)."""
    s = FakeOpenAI(lambda body: ("error", status))
    try:
        spec = PolicySpec.from_dict({"backend": "litellm", "litellm": {"model": "openai/x", "num_retries": 1,
                                                                       "api_base": s.url, "timeout": 5}})
        with pytest.raises(EvolveError, match="litellm backend openai/x"):
            load_policy(spec).generate([[{"role": "user", "content": "hi"}]], n=1, seed=0)
        assert len(s.requests) == requests
    finally:
        s.stop()
