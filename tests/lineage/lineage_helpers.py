"""Shared builders for the lineage tests (a module name no other test folder uses)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evolve.lineage import LineageStore
from evolve.rollout import Rollout
from evolve.verification.types import StageResult, TestFailure, VerifyResult


def make_rollout(task_id: str, pv: str, wv: str, passed: bool, i: int = 0, purpose: str = "train") -> Rollout:
    stages = [StageResult("compile", 1.0, True),
              StageResult("hidden", 1.0 if passed else 0.0, passed,
                          trace="" if passed else "f([]) expected 0, got None",
                          error_class=None if passed else "WrongAnswer",
                          failures=[] if passed else [TestFailure("hidden", "WrongAnswer", "", "[]", "0", "None")])]
    res = VerifyResult(task_id, 1.0 if passed else 0.0, passed, stages,
                       trace="" if passed else "f([]) expected 0, got None",
                       error_class=None if passed else "WrongAnswer")
    return Rollout(task_id=task_id, group=i // 4, sample_index=i % 4, prompt_version=pv, weights_version=wv,
                   messages=[{"role": "user", "content": "write f"}], prompt_text="<user>write f",
                   completion="def f(xs):\n    return sum(xs)\n", result=res, reward=res.reward,
                   advantage=0.5 if passed else -0.5, purpose=purpose, truncated=i == 3)


@dataclass
class Built:
    run: str
    gens: dict  # index -> generation id
    pvs: dict  # name -> prompt version hash
    wvs: dict  # name -> weights version id
    ckpt: dict  # name -> checkpoint manifest sha


def build_fork_merge(store: LineageStore, tmp: Path, run: str = "demo") -> Built:
    """demo:0 -> 1 -> 2 -> 3, a fork demo:4 from demo:1, and demo:5 (child of 3) whose prompt merges 3's and 4's.

    Weights: w0 (base) -> w1 -> w2 -> w3, and w4 forks from w1; demo:5 keeps w3.
    """
    store.create_run(run, {"seed": 7, "group_size": 4})
    art = store.artifacts(run)
    lc = store.record_lm_call("reflector", "offline", {"messages": [{"role": "user", "content": "improve"}]},
                              {"text": "Handle the empty list."}, tokens={"prompt": 10, "completion": 5},
                              latency_s=0.25)
    p = {"p0": store.put_prompt_version({"system": "Write Python.", "lessons": ""})}
    p["p1"] = store.put_prompt_version({"system": "Write Python.", "lessons": "- Handle the empty list."},
                                       parents=[p["p0"]], proposed_by="reflection", lm_call_ids=[lc])
    p["p2"] = store.put_prompt_version({"system": "Write Python.", "lessons": "- Use // for integers."},
                                       parents=[p["p0"]], proposed_by="reflection")
    p["p3"] = store.put_prompt_version(
        {"system": "Write Python.", "lessons": "- Handle the empty list.\n- Use // for integers."},
        parents=[p["p1"], p["p2"]], proposed_by="merge")
    w = {"w0": store.put_weights_version(None, None, "tiny-coder", kind="base")}
    ckpt = {}
    for name, parent in (("w1", "w0"), ("w2", "w1"), ("w3", "w2"), ("w4", "w1")):
        d = tmp / f"ckpt-{name}"
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(name.encode() * 1000)
        (d / "config.json").write_text('{"d": 8}')
        ckpt[name] = art.put_dir(d)
        opt = art.put_bytes(b"adam-" + name.encode())
        w[name] = store.put_weights_version(ckpt[name], w[parent], "tiny-coder", optimizer_artifact=opt,
                                            stats={"loss": 0.1, "steps": 2})
    gens: dict[int, int] = {}
    plan = [(0, None, "p0", "w0", 0.25), (1, 0, "p1", "w1", 0.40), (2, 1, "p1", "w2", 0.45),
            (3, 2, "p1", "w3", 0.50), (4, 1, "p2", "w4", 0.42), (5, 3, "p3", "w3", 0.60)]
    for idx, parent, pv, wv, score in plan:
        gid = store.begin_generation(run, gens[parent] if parent is not None else None, {"seed": 100 + idx})
        store.add_rollouts(gid, [make_rollout(f"t{i % 2}", p[pv], w[wv], i % 2 == 0, i) for i in range(4)])
        state = art.put_json({"generation": idx, "rng": "state"})
        store.commit_generation(gid, p[pv], w[wv], state_artifact=state,
                                metrics={"heldout": {"pass@1": score}, "train_reward": score / 2},
                                timings={"rollout": 1.0, "update": 0.5})
        gens[idx] = gid
    return Built(run, gens, p, w, ckpt)
