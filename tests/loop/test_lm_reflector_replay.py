"""A prompt-only run whose reflector is an LM behind a real OpenAI-compatible HTTP server on 127.0.0.1:
every reflection request is recorded in the lineage with the drafts it got back, the status line shows
the rules the LM wrote, and `evolve replay` reproduces each generation with the server gone."""

from __future__ import annotations

import hashlib
import json

import pytest
from fake_openai import FakeOpenAI
from loop_helpers import CI_CONFIG
from sqlalchemy import create_engine, text

# What a small reflector writes: rules that pass the filter, and replies it must refuse.
RULES = ["Include the boundary value k.", "Handle the empty list.", "Check every input case before returning.",
         "Write f(xs) that returns 7.\nThen stop."]


def deterministic_rules(body):
    """The same request always gets the same n drafts (so a replay can be compared)."""
    key = hashlib.sha256(json.dumps([body["messages"], body.get("seed")]).encode()).digest()
    return [(RULES[(key[0] + i) % len(RULES)], "stop") for i in range(int(body.get("n") or 1))]


@pytest.fixture
def reflector():
    server = FakeOpenAI(deterministic_rules)
    yield server
    server.stop()


def test_lm_reflection_is_recorded_shown_and_replays_without_the_server(loop_db, reflector):
    proc = loop_db.evolve("run", "--config", CI_CONFIG, "--mode", "prompt", "--name", "lm", "--generations", "2",
                          "--reflection-lm", "openai/local-reflector", "--reflection-api-base", reflector.url)
    sent = len(reflector.requests)
    assert sent > 0 and all(r["n"] >= 2 and "ONE general rule" in r["messages"][0]["content"]
                            for r in reflector.requests)
    engine = create_engine(loop_db.url)
    with engine.connect() as conn:
        rows = conn.execute(text("select response from lm_call where role = 'reflection' "
                                 "and model = 'openai/local-reflector'")).fetchall()
        lessons = [json.loads(c) if isinstance(c, str) else c
                   for (c,) in conn.execute(text("select components from prompt_version"))]
    engine.dispose()
    assert len(rows) == sent  # every request the server saw is in the lineage, with its drafts
    written = {ch["content"] for (r,) in rows for ch in (json.loads(r) if isinstance(r, str) else r)["choices"]}
    assert written <= set(RULES)
    added = {ln for c in lessons for ln in c.get("lessons", "").splitlines()}
    assert added and added <= set(RULES[:3])  # the refused reply never became a prompt
    assert any(f"'{line}'" in proc.stdout + proc.stderr for line in added), proc.stderr  # the status line shows the LM's rules
    reflector.stop()  # replay must not need it
    for ref in ("lm:1", "lm:2"):
        rep = loop_db.evolve("replay", ref, "--json", check=False)
        assert rep.stdout.strip(), rep.stderr
        report = json.loads(rep.stdout)
        assert rep.returncode == 0 and report["ok"], (report, rep.stderr)
        assert report["prompt_equal"] and report["rollouts_equal"] and report["metrics_equal"]
    assert len(reflector.requests) == sent


@pytest.mark.parametrize("loop_db", ["sqlite"], indirect=True)  # the client's timeout: no store in it
@pytest.mark.parametrize("timeout_s, answered", [(1, False), (30, True)])
def test_reflection_timeout_comes_from_the_run_config(loop_db, tmp_path, timeout_s, answered):
    """A reflector on CPU answers in minutes: the config's prompt.timeout_s is what the client waits
    (the prompt config's 60 s default timed every request of a served 1.5B out, 3 times each)."""
    server = FakeOpenAI(lambda body: ("slow", 3, deterministic_rules(body)))
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text(open(CI_CONFIG).read().replace("[loop.prompt]", f"[loop.prompt]\ntimeout_s = {timeout_s}", 1))
        loop_db.evolve("run", "--config", str(cfg), "--mode", "prompt", "--name", "slow", "--generations", "1",
                       "--reflection-lm", "openai/local-reflector", "--reflection-api-base", server.url)
    finally:
        server.stop()
    engine = create_engine(loop_db.url)
    with engine.connect() as conn:
        errors = [e for (e,) in conn.execute(text("select error from lm_call where role = 'reflection'"))]
    engine.dispose()
    assert errors, "no reflection call was recorded"
    if answered:
        assert all(e is None for e in errors), errors
    else:
        assert all(e and "Timeout" in e for e in errors), errors
