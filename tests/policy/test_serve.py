"""`evolve serve`: the OpenAI-compatible endpoint on 127.0.0.1, with the real SmolLM2 model behind it and the
project's own litellm reflector as the client (no stand-in server, no mock)."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from evolve.policy.serve import ChatService, apply_system, make_server

REPO = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-test-token"


def test_non_loopback_bind_is_refused_without_token():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("EVOLVE_SERVE_TOKEN", None)
    p = subprocess.run([sys.executable, "-m", "evolve", "serve", "--policy", "policies/smollm2-135m-instruct.toml",
                        "--host", "0.0.0.0", "--port", "0"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("error: refusing to serve on 0.0.0.0") and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_served_prompt_comes_first():
    msgs = apply_system("Evolved rules.", [{"role": "system", "content": "Client rules."},
                                           {"role": "user", "content": "hi"}])
    assert msgs == [{"role": "system", "content": "Evolved rules.\nClient rules."}, {"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server(smollm2_spec):
    from evolve.policy import load_policy

    policy = load_policy(smollm2_spec)
    service = ChatService(policy, "You are a Python programmer.", "smol-test", max_tokens=48)
    service.log_lines = []
    srv = make_server(service, "127.0.0.1", 0, TOKEN, log=service.log_lines.append)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", service
    srv.shutdown()
    srv.server_close()


def _post(url, body, token=TOKEN):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def test_token_is_required_and_bad_requests_are_400(server):
    url, _ = server
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(url + "/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, token=None)
    assert e.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(url + "/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 999})
    assert e.value.code == 400 and "n must be" in json.loads(e.value.read())["error"]["message"]


def test_chat_completion_from_the_real_model(server):
    url, _ = server
    out = _post(url + "/chat/completions", {"model": "smol-test", "max_tokens": 24, "n": 2, "seed": 3,
                                            "messages": [{"role": "user", "content": "Write def f(xs): sum of xs."}]})
    assert out["object"] == "chat.completion" and len(out["choices"]) == 2
    assert all(c["message"]["content"].strip() for c in out["choices"])
    assert 0 < out["usage"]["completion_tokens"] <= 48
    again = _post(url + "/chat/completions", {"model": "smol-test", "max_tokens": 24, "n": 2, "seed": 3,
                                              "messages": [{"role": "user", "content": "Write def f(xs): sum of xs."}]})
    assert [c["message"] for c in again["choices"]] == [c["message"] for c in out["choices"]]  # seeded
    big = _post(url + "/chat/completions", {"max_tokens": 100_000, "messages": [{"role": "user", "content": "Hi"}]})
    assert big["usage"]["completion_tokens"] <= 48  # clamped to the server's cap, not refused


def test_litellm_reflector_against_the_served_model(server, monkeypatch):
    """The project's reflector, through litellm, calls SmolLM2 served by the project itself."""
    from evolve.prompt import Candidate, MemoryRecorder, PromptEvolutionConfig, make_reflector
    from evolve.prompt.reflective_dataset import build_reflective_dataset

    sys.path.insert(0, str(REPO / "tests" / "prompt"))
    from prompt_helpers import div_failure, empty_failure

    url, service = server
    monkeypatch.setenv("EVOLVE_TEST_SERVE_TOKEN", TOKEN)
    cfg = PromptEvolutionConfig(reflection_lm="openai/smol-test", api_base=url, api_key_env="EVOLVE_TEST_SERVE_TOKEN",
                                retries=0, timeout_s=300, max_reflection_chars=900, max_field_chars=120,
                                proposals_per_step=1, reflection_drafts=2, components=("system", "lessons"))
    data = build_reflective_dataset([empty_failure("a"), div_failure("b")], cfg, random.Random(0))
    rec = MemoryRecorder()
    drafts = make_reflector(cfg, rec).reflect(Candidate({"system": "Write a Python function.", "lessons": ""}), data,
                                              random.Random(0), 1)
    (call,) = rec.calls
    assert call.response is not None and call.model == "openai/smol-test"  # the server answered
    assert call.tokens.get("completion", 0) > 0 and len(call.response["choices"]) == 2  # two drafts, one request
    # A 135M model rarely writes one clean general rule: a ramble, a truncated reply or a restatement is
    # refused (and recorded), never a prompt; an accepted draft is one short line added to the lessons.
    (draft,) = drafts
    if draft.error is None:
        (line,) = draft.components["lessons"].splitlines()
        assert 0 < len(line) <= 120 and draft.components["system"] == "Write a Python function."
    else:
        assert "rejected" in draft.error


def test_a_client_that_left_while_queued_costs_no_generation(server):
    """A reflector that timed out while the one model was busy (and retried) must not leave a queue of
    requests that each generate for nobody: at its turn the request is dropped, with one log line."""
    url, service = server
    port = int(url.split(":")[2].split("/")[0])
    body = json.dumps({"max_tokens": 48, "messages": [{"role": "user", "content": "Hi"}]}).encode()
    generated = []
    real = service.policy.model.generate
    service.policy.model.generate = lambda *a, **k: generated.append(1) or real(*a, **k)
    try:
        with service.lock:  # the model is busy with another request
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(0.5)  # the handler has read the request and waits for the lock
            sock.close()     # the client gives up
        deadline = time.monotonic() + 30
        while not any("request dropped" in ln for ln in service.log_lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("client gone before its turn" in ln for ln in service.log_lines), service.log_lines
        assert generated == []
        # the server goes on: a client that stays is served
        out = _post(url + "/chat/completions", {"max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]})
        assert out["choices"] and generated == [1]
    finally:
        del service.policy.model.generate
