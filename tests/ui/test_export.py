"""`evolve export jsonl|mlflow` on the real run's lineage, read back and compared with the database."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest
from ui_helpers import EVOLVE, REPO, evolve

from evolve.lineage.export import MLFLOW_MISSING


def counts(db, run="t") -> dict:
    con = sqlite3.connect(db)
    rid = con.execute("select id from run where name = ?", (run,)).fetchone()[0]
    gids = f"(select id from generation where run_id = {int(rid)})"
    out = {
        "generation": con.execute(f"select count(*) from generation where run_id = {rid}").fetchone()[0],
        "rollout": con.execute(f"select count(*) from rollout where generation_id in {gids}").fetchone()[0],
        "lm_call": con.execute(f"select count(*) from lm_call where generation_id in {gids}").fetchone()[0],
        "weights_version": con.execute(f"select count(distinct weights_version) from generation where run_id = {rid}")
        .fetchone()[0],
    }
    con.close()
    return out


def test_export_jsonl_has_every_record(ui_db, tmp_path):
    out = tmp_path / "t.jsonl"
    evolve("export", "jsonl", "t", "--out", str(out), db=ui_db)
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    by_type: dict[str, list] = {}
    for r in recs:
        by_type.setdefault(r["type"], []).append(r)
    assert recs[0]["type"] == "run" and recs[0]["name"] == "t" and len(by_type["run"]) == 1
    for kind, n in counts(ui_db).items():
        assert len(by_type[kind]) == n, kind
    con = sqlite3.connect(ui_db)
    first = con.execute("select id, completion, reward, passed from rollout where id = ?",
                        (by_type["rollout"][0]["id"],)).fetchone()
    con.close()
    r0 = by_type["rollout"][0]
    assert (r0["id"], r0["completion"], r0["reward"], bool(r0["passed"])) == (first[0], first[1], first[2],
                                                                               bool(first[3]))
    assert {g["name"] for g in by_type["generation"]} == {"t:0", "t:1", "t:2", "t:3"}
    assert all("components" in p for p in by_type["prompt_version"])
    # stdout form, without rollouts; an unknown run is a one-line error and writes nothing
    proc = evolve("export", "jsonl", "t", "--no-rollouts", db=ui_db)
    assert "rollout" not in {json.loads(x)["type"] for x in proc.stdout.splitlines()}
    bad = evolve("export", "jsonl", "nope", "--out", str(tmp_path / "n.jsonl"), db=ui_db, check=False)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: unknown run 'nope'"
    assert not (tmp_path / "n.jsonl").exists()


def mlflow_readback(uri: str, env: dict) -> dict:
    """Read the exported run back with MLflow's own client, in a fresh process."""
    code = f"""
import json, mlflow
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri={uri!r}, registry_uri={uri!r})
mlflow.set_tracking_uri({uri!r}); mlflow.set_registry_uri({uri!r})
exp = c.get_experiment_by_name("evolve")
runs = c.search_runs([exp.experiment_id])
r = runs[0]
hist = {{m.step: m.value for m in c.get_metric_history(r.info.run_id, "heldout.pass_at_1")}}
pv = {{m.step: m.value for m in c.get_metric_history(r.info.run_id, "prompt.mlflow_version")}}
latest = mlflow.genai.load_prompt("prompts:/evolve-t@latest")
prompts = [mlflow.genai.load_prompt(f"prompts:/evolve-t/{{v}}") for v in range(1, int(latest.version) + 1)]
print(json.dumps({{"runs": len(runs), "name": r.info.run_name, "tags": r.data.tags, "pass1": hist, "pv": pv,
                  "prompts": [{{"v": p.version, "template": p.template, "tags": p.tags}} for p in prompts]}}))
"""
    proc = subprocess.run([*EVOLVE[:1], "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_export_mlflow_round_trips(ui_db, tmp_path, kind):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    uri = f"file://{tmp_path / 'mlruns'}" if kind == "file" else f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    for _ in range(2):  # a second export adds a run but no duplicate prompt versions
        proc = subprocess.run([*EVOLVE, "export", "mlflow", "t", "--db", f"sqlite:///{ui_db}", "--tracking-uri", uri],
                              cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
    got = mlflow_readback(uri, env)
    con = sqlite3.connect(ui_db)
    gens = con.execute("select g.\"index\", json_extract(g.metrics, '$.heldout.\"pass@1\"'), g.prompt_version "
                       "from generation g join run r on r.id = g.run_id where r.name = 't' and g.status = 'committed'"
                       ).fetchall()
    comps = dict(con.execute("select id, components from prompt_version").fetchall())
    con.close()
    assert got["runs"] == 2 and got["name"] == "t" and got["tags"]["evolve.run"] == "t"
    assert {int(k): v for k, v in got["pass1"].items()} == {i: p for i, p, _ in gens}
    by_hash = {p["tags"]["evolve.prompt_version"]: p for p in got["prompts"]}
    assert len(by_hash) == len(got["prompts"])  # no duplicates after two exports
    for i, _, pv in gens:  # each step names the MLflow prompt version holding that generation's prompt
        p = by_hash[pv]
        assert got["pv"][str(i)] == float(p["v"])
        assert p["template"] == "\n\n".join(f"## {k}\n{v}" for k, v in json.loads(comps[pv]).items())


def test_export_mlflow_without_mlflow_is_one_line(ui_db, tmp_path):
    shim = tmp_path / "shim" / "mlflow"  # an `import mlflow` that fails, as on a machine without the extra
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named mlflow')\n")
    env = {**os.environ, "PYTHONPATH": f"{shim.parent}{os.pathsep}{REPO}"}
    proc = subprocess.run([*EVOLVE, "export", "mlflow", "t", "--db", f"sqlite:///{ui_db}", "--tracking-uri",
                           f"sqlite:///{tmp_path / 'm.db'}"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {' '.join(MLFLOW_MISSING.split())}"]
    assert not (tmp_path / "m.db").exists()
