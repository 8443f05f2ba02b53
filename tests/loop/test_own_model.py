"""A user's own model through the real CLI with no copied spec file: `evolve run --model DIR` records
the config's policy spec on that model, and `evolve eval --model DIR` evaluates it."""

from __future__ import annotations

import json

from loop_helpers import CI_CONFIG, REPO

from evolve.policy import PolicySpec


def test_run_and_eval_take_a_model_folder(module_sqlite_loop_db, tiny_model_dir):
    db = module_sqlite_loop_db
    tasks = str(REPO / "docs" / "examples" / "tasks.jsonl")
    db.evolve("run", "--config", CI_CONFIG, "--model", str(tiny_model_dir), "--suite", tasks,
              "--name", "mymodel", "--generations", "0")
    store = db.store()
    try:
        recorded = store.get_run("mymodel").config["policy_spec"]
    finally:
        store.close()
    ci = PolicySpec.from_toml(REPO / "policies" / "tiny-coder-ci.toml").model_dump(mode="json")
    assert recorded["model"] == str(tiny_model_dir) and recorded["name"] == tiny_model_dir.name
    assert {k: v for k, v in recorded.items() if k not in ("model", "name")} == \
        {k: v for k, v in ci.items() if k not in ("model", "name")}
    report = json.loads(db.evolve("eval", "--model", str(tiny_model_dir), "--policy", "policies/tiny-coder-ci.toml",
                                  "--suite", tasks, "--split", "all", "--samples", "2", "--k", "1,2", "--json").stdout)
    assert report["model"] == str(tiny_model_dir) and report["n_tasks"] == 10
    bad = db.evolve("eval", "--model", "/nonexistent/model", "--suite", tasks, check=False)
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode == 2 and lines == ["error: model folder /nonexistent/model does not exist"], bad.stderr
