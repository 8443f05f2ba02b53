"""pass@k evaluation end to end: gym tasks, a real backend (litellm over local HTTP), real verdicts."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from checker import make_verifier

from evolve.errors import ConfigError
from evolve.policy import PolicySpec, load_policy
from evolve.policy.evaluate import evaluate_pass_at_k, parse_ks
from evolve.util.passk import pass_at_k

ANSWERS: dict[str, tuple[str, int]] = {}  # task prompt -> (canonical solution, how many of 4 are right)


class _Server(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        solution, right = ANSWERS[body["messages"][-1]["content"]]
        n = int(body.get("n") or 1)
        texts = [solution if i < right else "def f(*a):\n    return None\n" for i in range(n)]
        payload = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                              "choices": [{"index": i, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": t}}
                                          for i, t in enumerate(texts)]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_pass_at_k_per_task_and_overall():
    from evolve.gym import load_gym

    tasks = load_gym("heldout", seed=0, n=3)
    for task, right in zip(tasks, [0, 1, 4], strict=True):
        ANSWERS[task.prompt] = (task.canonical_solution, right)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        spec = PolicySpec.from_dict({"backend": "litellm", "litellm": {
            "model": "openai/m", "api_base": f"http://127.0.0.1:{srv.server_address[1]}/v1"}})
        policy = load_policy(spec)
        with make_verifier() as verifier:
            report = evaluate_pass_at_k(policy, tasks, {"system": "Write Python."}, samples=4, ks=[1, 2, 4],
                                        verifier=verifier, seed=0)
    finally:
        srv.shutdown()
    rows = [report["tasks"][t.task_id] for t in tasks]
    assert [(r["n"], r["c"]) for r in rows] == [(4, 0), (4, 1), (4, 4)]
    assert rows[1]["pass@1"] == pytest.approx(0.25) and rows[1]["pass@2"] == pytest.approx(0.5)
    assert rows[1]["pass@4"] == 1.0 and rows[0]["pass@4"] == 0.0
    for k in (1, 2, 4):
        want = sum(pass_at_k(4, c, k) for c in (0, 1, 4)) / 3
        assert report["overall"][f"pass@{k}"] == pytest.approx(want)
    assert sum(report["failure_classes"].values()) == 7


def test_parse_ks():
    assert parse_ks("16,1,4", 8) == [1, 4]
    for bad in ("a,b", "0,1", "32"):
        with pytest.raises(ConfigError):
            parse_ks(bad, 8)
