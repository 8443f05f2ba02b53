"""`evolve eval` through the real CLI entry point (subprocess): outputs and one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import evolve_zygote
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _evolve(*args, cwd=ROOT):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "EVOLVE_RUNS_DIR": os.environ.get("EVOLVE_RUNS_DIR", "")}
    env = {k: v for k, v in env.items() if v}
    return evolve_zygote.run(["eval", *args], env, cwd=cwd, timeout=300)


@pytest.mark.parametrize("args,needle", [
    ((), "exactly one of GEN"),
    (("run:0", "--policy", "policies/tiny-coder.toml"), "exactly one of GEN"),
    (("--policy", "policies/nope.toml", "--tasks", "1"), "not found"),
    (("--policy", "policies/tiny-coder-ci.toml", "--suite", "mbpp"), "unknown suite"),
    (("--policy", "policies/tiny-coder-ci.toml", "--samples", "2", "--k", "4"), "exceeds --samples"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    p = _evolve(*args)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr


def test_unknown_generation_is_one_line(tmp_path):
    p = _evolve("nope:3", "--db", f"sqlite:///{tmp_path / 'missing.db'}", "--tasks", "1")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 1


def test_eval_policy_json(random_model_dir, tmp_path):
    spec = tmp_path / "p.toml"
    spec.write_text(f'model = "{random_model_dir}"\n[sampling]\nmax_new_tokens = 12\n')
    p = _evolve("--policy", str(spec), "--suite", "tiny-coder", "--split", "heldout", "--samples", "4",
                "--k", "1,4", "--tasks", "3", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout)
    assert report["n_tasks"] == 3 and report["ks"] == [1, 4] and set(report["overall"]) == {"pass@1", "pass@4"}
    assert all(row["n"] == 4 for row in report["tasks"].values())
    # A random model writes no working code: every sample fails, and the failures are classified.
    assert report["overall"]["pass@4"] == 0.0 and sum(report["failure_classes"].values()) == 12


def test_eval_a_lineage_generation(random_model_dir, tmp_path):
    """GEN: the checkpoint and prompt version come from a real SQLite lineage + artifact store."""
    from evolve.lineage import LineageStore
    from evolve.policy import PolicySpec, load_policy

    spec = PolicySpec.from_dict({"model": str(random_model_dir), "sampling": {"max_new_tokens": 8}})
    policy = load_policy(spec)
    db = f"sqlite:///{tmp_path / 'lineage.db'}"
    store = LineageStore.open(db)
    store.create_run("r1", {"policy_spec": spec.model_dump(mode="json")})
    pv = store.put_prompt_version({"system": "Write a Python function."})
    sha = store.artifacts("r1").put_dir(policy.save(tmp_path / "ckpt"))
    wv = store.put_weights_version(sha, None, spec.model, kind="full", stats={"weights_sha256": policy.weights_hash()})
    gid = store.begin_generation("r1", None, {"seed": 0})
    store.commit_generation(gid, pv, wv, state_artifact=sha)
    store.close()
    p = _evolve("r1:0", "--db", db, "--suite", "tiny-coder", "--samples", "2", "--k", "1,2", "--tasks", "2",
                "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout)
    assert report["source"] == "r1:0" and report["n_tasks"] == 2 and report["model"] == str(random_model_dir)
    assert set(report["overall"]) == {"pass@1", "pass@2"}


@pytest.mark.parametrize("suite", ["tiny-coder-repair", "docs/examples/shout_env.py"])
def test_eval_runs_any_environment(random_model_dir, tmp_path, suite):
    """`--suite` takes any environment: a registered multi-turn one, or a one-file environment by path."""
    spec = tmp_path / "p.toml"
    spec.write_text(f'model = "{random_model_dir}"\n[sampling]\nmax_new_tokens = 8\n')
    p = _evolve("--policy", str(spec), "--suite", suite, "--split", "heldout", "--samples", "2", "--k", "1,2",
                "--tasks", "2", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout)
    assert report["n_tasks"] == 2 and all(row["n"] == 2 for row in report["tasks"].values())
    assert report["overall"]["pass@2"] == 0.0  # a random model writes no working code, in any turn


def test_eval_max_turns_sets_the_episode_length(random_model_dir, tmp_path):
    """--max-turns means what the loop config's max_turns means: a random model never passes the
    visible tests, so every self-repair episode runs exactly max_turns policy turns."""
    spec = tmp_path / "p.toml"
    spec.write_text(f'model = "{random_model_dir}"\n[sampling]\nmax_new_tokens = 8\n')
    for turns in (2, 1):
        p = _evolve("--policy", str(spec), "--suite", "tiny-coder-repair", "--samples", "2", "--k", "1",
                    "--tasks", "2", "--max-turns", str(turns), "--json")
        assert p.returncode == 0, p.stderr[-2000:]
        report = json.loads(p.stdout)
        assert report["max_turns"] == turns and report["turns"] == {str(turns): 4}, report["turns"]
