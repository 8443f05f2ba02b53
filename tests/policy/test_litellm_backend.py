"""The litellm backend against a tiny local OpenAI-compatible HTTP server (127.0.0.1 only)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evolve.errors import EvolveError
from evolve.policy import FROZEN_MESSAGE, PolicySpec, load_policy


class _Handler(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        n = int(body.get("n") or 1)
        last = body["messages"][-1]["content"]
        choices = [{"index": i, "finish_reason": "stop" if i % 2 == 0 else "length",
                    "message": {"role": "assistant", "content": f"def f(xs):\n    return {i}  # {last}"}}
                   for i in range(min(n, 3))]  # at most 3 per call: the backend must ask again
        payload = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                              "choices": choices,
                              "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def test_litellm_generates_text_and_cannot_update(server, tmp_path):
    spec = PolicySpec.from_dict({"backend": "litellm", "model": "api",
                                 "litellm": {"model": "openai/local-model", "api_base": server},
                                 "sampling": {"n": 4, "temperature": 0.5, "max_new_tokens": 64}})
    policy = load_policy(spec)
    assert policy.can_update is False
    prompts = [[{"role": "system", "content": "Write Python."}, {"role": "user", "content": "task A"}],
               [{"role": "user", "content": "task B"}]]
    out = policy.generate(prompts, n=4, seed=5)
    assert [len(g) for g in out] == [4, 4]
    assert out[0][0].text.endswith("# task A") and out[1][3].text.endswith("# task B")
    assert out[0][1].truncated and not out[0][0].truncated
    assert out[0][0].completion_ids == [] and out[0][0].logprobs == []
    sent = _Handler.requests[0]
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
