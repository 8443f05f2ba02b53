"""Issue 36's speed changes, each seen where a test can see it: one engine request for every prompt arm
of a generation (``loop.one_request``, counted on the real HF backend of the CI tiny model), and a
loop without the per-generation held-out check (``loop.heldout_each_generation = false``: the real CLI,
real sandbox, real SQLite; its run still replays hash-equal and its report still renders)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from loop_helpers import CI_CONFIG

from evolve.env import load_environment
from evolve.gym.notes import SEED_INSTRUCTION
from evolve.loop.config import LoopConfig
from evolve.loop.rollouts import roll_out_arms
from evolve.loop.selection.base import Arm
from evolve.prompt.candidate import Candidate


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    from evolve.policy import PolicySpec, load_policy

    return load_policy(PolicySpec.from_dict({"model": str(tiny_model_dir), "threads": 1,
                                             "sampling": {"max_new_tokens": 8}}))


def _arms_rolled(policy, monkeypatch, one_request: bool, seed_per_prompt: bool, sizes=(2, 2)):
    """Two prompt arms over three tasks; how many engine requests the backend got."""
    calls = []
    real = policy.backend.generate

    def counted(prompts, n, seed, **kw):
        calls.append(len(prompts))
        return real(prompts, n, seed, **kw)

    monkeypatch.setattr(policy.backend, "generate", counted)
    monkeypatch.setattr(policy.backend, "seed_per_prompt", seed_per_prompt, raising=False)
    env = load_environment("tiny-coder")
    tasks = env.splits()["train"][:3]
    ctx = SimpleNamespace(config=LoopConfig(one_request=one_request), policy=policy, env=env, verifier=None)
    arms = [Arm(Candidate({"system": SEED_INSTRUCTION}), sizes[0]),
            Arm(Candidate({"system": SEED_INSTRUCTION + " Be brief."}), sizes[1])]
    roll_out_arms(ctx, arms, tasks, seed=5, weights_version="w")
    return calls, arms, tasks


def test_one_request_sends_every_arm_at_once(policy, monkeypatch):
    calls, arms, tasks = _arms_rolled(policy, monkeypatch, one_request=True, seed_per_prompt=True)
    assert calls == [6]  # 2 arms x 3 tasks in one request (n = 2 each)
    for arm in arms:  # each arm's rollouts numbered as its own request would number them
        assert [(r.task_id, r.group, r.sample_index) for r in arm.rollouts] == [
            (t.task_id, g, i) for g, t in enumerate(tasks) for i in range(2)]
        assert {r.prompt_version for r in arm.rollouts} == {arm.candidate.id}
        assert all(r.messages[0]["content"] == arm.candidate.components["system"] for r in arm.rollouts)


@pytest.mark.parametrize("one_request,seed_per_prompt,sizes", [
    (False, True, (2, 2)),   # off (the default: recorded runs keep their requests)
    (True, False, (2, 2)),   # HF: a prompt's draws depend on the batch, merging would break the arms' CRN
    (True, True, (3, 1)),    # arms of two group sizes: a request has one n
])
def test_one_request_only_where_it_keeps_the_samples(policy, monkeypatch, one_request, seed_per_prompt, sizes):
    calls, arms, _ = _arms_rolled(policy, monkeypatch, one_request, seed_per_prompt, sizes)
    assert calls == [3, 3]
    assert [len(a.rollouts) for a in arms] == [3 * sizes[0], 3 * sizes[1]]


def test_the_vllm_backend_declares_per_prompt_seeds():
    # the backend the powered config samples with; without the flag its arms would go one request each
    import ast
    from pathlib import Path

    src = (Path(__file__).resolve().parents[2] / "evolve/policy/backends/vllm_backend.py").read_text()
    cls = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == "VllmBackend")
    flags = {t.id: v.value for n in cls.body if isinstance(n, ast.Assign)
             for t, v in [(n.targets[0], n.value)] if isinstance(t, ast.Name) and isinstance(v, ast.Constant)}
    assert flags.get("seed_per_prompt") is True


def test_off_needs_the_start_and_end_figure():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="heldout_final_tasks"):
        LoopConfig(heldout_each_generation=False)
    assert LoopConfig().heldout_each_generation  # the default keeps recorded runs' rules
    assert not LoopConfig().one_request


@pytest.mark.slow  # a 2-generation run and two replays: ~100 s at load 8-10 on 2 cores
def test_a_loop_without_the_per_generation_check(module_sqlite_loop_db, tmp_path):
    db = module_sqlite_loop_db
    db.evolve("run", "--config", CI_CONFIG, "--name", "noh", "--generations", "2",
              "--loop.heldout_each_generation", "false", "--loop.heldout_final_tasks", "2",
              "--loop.heldout_final_samples", "2", "--loop.heldout_full_at_start", "false")
    store = db.store()
    try:
        gens = [g for g in store.lineage("noh") if g["status"] == "committed"]
        assert [g["index"] for g in gens] == [0, 1, 2]
        held = {g["index"]: len(store.rollouts(g["id"], purpose="heldout")) for g in gens}
        metrics = {g["index"]: g["metrics"] for g in gens}
    finally:
        store.close()
    assert held == {0: 8 * 4, 1: 0, 2: 2 * 2}  # gen 0's check; none in gen 1; the end figure at gen 2
    assert "heldout" in metrics[0] and "heldout" not in metrics[1] and "heldout" not in metrics[2]
    assert "heldout" not in metrics[1]["timings"]
    assert metrics[2]["heldout_full"]["samples"] == 4 and "train_pass_rate" in metrics[1]
    for ref in ("noh:1", "noh:2"):  # replay recomputes both, the check left out and the end figure in
        report = json.loads(db.evolve("replay", ref, "--json").stdout)
        assert report["ok"] and report["rollouts_equal"] and report["metrics_equal"] and report["weights_equal"]
    db.evolve("report", "noh", "--out", str(tmp_path / "rep"))
    assert "held-out pass@1" in (tmp_path / "rep" / "summary.md").read_text()
