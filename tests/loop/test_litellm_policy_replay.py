"""A run whose policy is behind litellm (a real OpenAI-compatible HTTP server on 127.0.0.1) records
every policy call like a reflection call, so it replays with the server gone: same prompts, same
completions, rewards and metrics. A refused call is recorded as failed, not lost."""

from __future__ import annotations

import hashlib
import json

import pytest
from fake_openai import FakeOpenAI
from loop_helpers import CI_CONFIG
from sqlalchemy import create_engine, text

BODIES = ["def f(xs):\n    return 0\n", "def f(xs):\n    return len(xs)\n", "def f(xs):\n    return sum(xs)\n",
          "def f(xs):\n    return max(xs) if xs else 0\n", "def f(s, k):\n    return ''\n"]


def deterministic_bodies(body):
    """The same request always gets the same n completions (so a replay can be compared)."""
    key = hashlib.sha256(json.dumps([body["messages"], body.get("seed")]).encode()).digest()
    return [(BODIES[(key[0] + i) % len(BODIES)], "stop") for i in range(int(body.get("n") or 1))]


@pytest.fixture
def api_policy(tmp_path):
    server = FakeOpenAI(deterministic_bodies)
    spec = tmp_path / "api.toml"
    spec.write_text(f'backend = "litellm"\nmodel = "api"\n[litellm]\nmodel = "openai/local-coder"\n'
                    f'api_base = "{server.url}"\ntimeout = 20\nnum_retries = 0\n'
                    '[sampling]\ntemperature = 1.0\nmax_new_tokens = 64\n')
    yield server, spec
    server.stop()


@pytest.mark.parametrize("loop_db", ["sqlite"], indirect=True)  # LM calls on PostgreSQL: test_lm_reflector_replay
def test_litellm_policy_calls_are_recorded_and_replay_without_the_server(loop_db, api_policy):
    server, spec = api_policy
    proc = loop_db.evolve("run", "--config", CI_CONFIG, "--policy", str(spec), "--mode", "prompt", "--name", "api",
                          "--generations", "1")
    assert "weights frozen" in proc.stderr + proc.stdout
    sent = len(server.requests)
    assert sent > 0
    engine = create_engine(loop_db.url)
    with engine.connect() as conn:
        n_policy = conn.scalar(text("select count(*) from lm_call where role = 'policy'"))
        failed = conn.scalar(text("select count(*) from lm_call where role = 'policy' and error is not null"))
    engine.dispose()
    assert n_policy == sent and failed == 0  # every request the server saw is in the lineage
    server.stop()  # replay must not need it
    for ref in ("api:1", "api:0"):
        rep = loop_db.evolve("replay", ref, "--json", check=False)
        report = json.loads(rep.stdout)
        assert rep.returncode == 0 and report["ok"], (report, rep.stderr)
        assert report["rollouts_equal"] and report["metrics_equal"] and report["n_rollouts"] > 0
    assert len(server.requests) == sent
