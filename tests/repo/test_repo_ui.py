"""A repo-fix episode (scripted policy, real environment and grading) stored through the real
LineageStore and shown by the real UI app: tool calls and observations appear as turns."""

from __future__ import annotations

import json
import re

from repo_helpers import ScriptedSample
from starlette.testclient import TestClient

from evolve.env.episode import run_episodes


class _OneShot:
    def __init__(self, replies):
        self.replies = replies

    def generate(self, prompts, n=None, seed=0):
        out = []
        for msgs in prompts:
            k = sum(m["role"] == "assistant" for m in msgs)
            out.append([ScriptedSample(self.replies[min(k, len(self.replies) - 1)]) for _ in range(n or 1)])
        return out


class _P:
    components: dict = {}
    id = "p"


def test_the_ui_shows_a_repo_fix_transcript(env, tmp_path):
    from evolve.lineage import LineageStore
    from evolve.ui.app import create_app

    task = env.splits()["train"][0]
    calls = [json.dumps({"tool": "search", "pattern": "def clamp"}), "not a tool call", '{"tool": "submit"}']
    (group,) = run_episodes(env, _OneShot(calls), env.wrap_verifier(None), _P(), [task], 1, 0)
    db = tmp_path / "l.db"
    with LineageStore.open(f"sqlite:///{db}") as store:
        store.create_run("r", {"loop": {"mode": "coupled", "heldout_ks": [1]}, "verifier_isolation": "bwrap"})
        pv = store.put_prompt_version({"system": "s"}, proposed_by="seed")
        wv = store.put_weights_version(None, None, "m", kind="base")
        gid = store.begin_generation("r", None, {})
        store.add_rollouts(gid, group)
        store.commit_generation(gid, pv, wv, metrics={"heldout": {"pass@1": 0.0}})
    with LineageStore.open(f"sqlite:///{db}", create=False, auto_upgrade=False) as store:
        client = TestClient(create_app(store, allowed_hosts=["testserver"]), base_url="http://testserver")
        run_id = re.findall(r"/run/(\d+)", client.get("/").text)[0]
        page = client.get(f"/run/{run_id}/gen/0").text
    assert "episode (5 turns)" in page
    assert "&#34;tool&#34;: &#34;search&#34;" in page and "minicalc/__init__.py:4: def clamp" in page
    assert "error: no tool call found" in page
