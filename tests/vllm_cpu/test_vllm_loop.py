"""The loop with backend = "vllm" on CPU, through the real CLI: the shipped policies/smollm2-135m-vllm-cpu.toml
(SmolLM2-135M in bf16, vLLM in-process; completions cut to 32 tokens), the real sandbox, SQLite. `evolve run` (generations 0 and 1), `resume` (2), a fork from 1, and `replay`.
Marker `vllm`: `.ci/vllm_cpu.sh` runs it in .venv-vllm."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1500)]

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
all_fail_groups = "both"
"""


def vllm_policy(text: str) -> str:
    """The shipped vLLM-CPU spec with short completions (the rest as a user runs it)."""
    assert re.search(r'(?m)^backend = "vllm"', text)
    return re.sub(r"(?m)^max_new_tokens = \d+", "max_new_tokens = 32", text)


def evolve(*args: str, db: Path, timeout: int = 900, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "evolve", *args, "--db", f"sqlite:///{db}"], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"evolve {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-6000:]}")
    return proc


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory, smollm2_spec):
    tmp = tmp_path_factory.mktemp("vllm-loop")
    (tmp / "policy.toml").write_text(vllm_policy((REPO / "policies" / "smollm2-135m-vllm-cpu.toml").read_text()))
    (tmp / "loop.toml").write_text(CONFIG.format(policy=tmp / "policy.toml"))
    db = tmp / "lineage.db"
    evolve("run", "--config", str(tmp / "loop.toml"), "--name", "v", db=db)
    evolve("resume", "v", "--generations", "1", db=db)
    evolve("resume", "v", "--from", "v:1", "--generations", "1", db=db)
    return db


def test_run_resume_and_fork_commit_generations_that_train(vllm_run):
    runs = json.loads(evolve("lineage", "v", "--json", db=vllm_run).stdout)
    names = [g["name"] for g in runs]
    assert names[:3] == ["v:0", "v:1", "v:2"] and {g["status"] for g in runs} == {"committed"}, names
    for g in runs[1:3]:
        update = g["metrics"]["update"]
        assert update["n_trained_groups"] >= 1 and update["optimizer_steps"] >= 1, update
    assert len({g["weights_version"] for g in runs[:3]}) == 3
    forks = [g for g in runs if g["name"] not in ("v:0", "v:1", "v:2")]
    assert len(forks) == 1 and forks[0]["parent"] == "v:1" and forks[0]["status"] == "committed", forks
    assert evolve("check", "v", db=vllm_run).returncode == 0


def test_a_prompt_only_generation_replays_hash_equal(tmp_path, smollm2_spec):
    """No update, so no weight sync empties the engine's prefix cache between generations; the loop's
    begin_generation does, so generation 2 straight through and its replay on a fresh engine prefill alike
    (on an AMX CPU a cached prefix gives other bf16 results; this small run drew the same without the reset,
    so the reset itself is guarded by test_vllm_backend's fresh-cache check)."""
    (tmp_path / "policy.toml").write_text(vllm_policy((REPO / "policies" / "smollm2-135m-vllm-cpu.toml").read_text()))
    config = CONFIG.format(policy=tmp_path / "policy.toml").replace('mode = "coupled"', 'mode = "prompt"')
    (tmp_path / "loop.toml").write_text(config.replace("generations = 1", "generations = 2"))
    db = tmp_path / "lineage.db"
    evolve("run", "--config", str(tmp_path / "loop.toml"), "--name", "p", db=db)
    proc = evolve("replay", "p:2", "--json", db=db, check=False)
    report = json.loads(proc.stdout)
    assert report["prompt_equal"] and report["ok"], report


def test_replay_is_hash_equal_or_names_the_difference(vllm_run):
    proc = evolve("replay", "v:2", "--json", db=vllm_run, check=False)
    report = json.loads(proc.stdout)
    assert report["prompt_equal"] and report["weights_equal"] and report["ok"], report
    assert proc.returncode == 0
