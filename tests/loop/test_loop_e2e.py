"""The loop end to end through the real CLI: run, inspect, resume, fork, replay, report,
(kill -9 and recovery: test_resume_identical.py). Real tiny model (the CI preset), real sandbox, a real SQLite file, and the
same tests on PostgreSQL when EVOLVE_TEST_PG_URL is set (CI starts one)."""

from __future__ import annotations

import json

import pytest
from loop_helpers import CI_CONFIG
from loop_helpers import typed_keys as keys
from sqlalchemy import create_engine, text

from evolve.loop import power
from evolve.loop.fingerprint import generation_fingerprint


def lineage(db, run: str) -> list[dict]:
    return json.loads(db.evolve("lineage", run, "--json").stdout)


def fingerprint(db, name: str) -> dict:
    store = db.store()
    try:
        return generation_fingerprint(store, store.resolve_generation(name))
    finally:
        store.close()


def scalar_rows(db, sql: str) -> list:
    engine = create_engine(db.url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def base_run(module_loop_db):
    """One short coupled run (generation 0 + 2 generations) shared by the tests below."""
    proc = module_loop_db.evolve("run", "--config", CI_CONFIG, "--name", "t", "--generations", "2")
    module_loop_db.run_stderr = proc.stderr
    return module_loop_db


def test_run_records_a_committed_lineage(base_run):
    gens = lineage(base_run, "t")
    assert [g["status"] for g in gens] == ["committed"] * 3
    by_name = {g["name"]: g for g in gens}
    assert by_name["t:0"]["parent"] is None
    assert by_name["t:1"]["parent"] == "t:0"
    assert by_name["t:2"]["parent"] == "t:1"
    for g in gens:
        held = g["metrics"]["heldout"]
        assert 0.0 <= held["pass@1"] <= held["pass@4"] <= 1.0
    # The coupled generations trained the weights: the parameters themselves changed (sha256 of
    # every tensor), and the update that did it took an optimizer step on real gradients.
    sha = {n: fingerprint(base_run, n)["weights_sha256"] for n in ("t:0", "t:1", "t:2")}
    moved = [n for n, p in (("t:1", "t:0"), ("t:2", "t:1")) if sha[n] != sha[p]]
    assert moved, "no generation changed the weights"
    for n in moved:
        update = by_name[n]["metrics"]["update"]
        assert update["optimizer_steps"] >= 1 and update["grad_norm"] > 0 and update["n_trained_groups"] > 0
    assert base_run.evolve("check", "t").returncode == 0


def test_recorded_metrics_have_the_declared_shape(base_run):
    """Every key the loop committed is declared in evolve/metrics.py (the types the status line, the
    report and the UI are checked against), and the sub-records have their declared keys."""
    from evolve.metrics import GenerationMetrics, HeldoutMetrics, Levers, RoutingSummary, UpdateRecord

    gens = lineage(base_run, "t")
    for g in gens:
        m = g["metrics"]
        assert set(m) <= keys(GenerationMetrics), g["name"]
        assert set(m["heldout"]) <= keys(HeldoutMetrics) | {f"pass@{k}" for k in (1, 4, 8)}
        if g["parent"] is not None:
            assert set(m["routing"]) == keys(RoutingSummary) and set(m["levers"]) == keys(Levers)
            assert set(m["update"]) <= keys(UpdateRecord)
    assert set(gens[-1]["metrics"]) >= {"heldout", "train_reward", "routing", "update", "challengers", "pool"}


def test_status_lines_are_never_wrapped(base_run):
    """The run's header names the database in full on one line, however long its label (a path or a
    PostgreSQL URL): output that is not a terminal is read by scripts, which must not see a cut."""
    store = base_run.store()
    label = store.target.label
    store.close()
    head = [ln for ln in base_run.run_stderr.splitlines() if ln.startswith("run t: mode")]
    assert len(head) == 1 and head[0].rstrip().endswith(f"db {label}"), base_run.run_stderr


def test_run_states_and_records_the_power_of_its_shape(base_run):
    """`evolve run` prints what its promotion test can detect before the first generation, and records
    the same table in the run's config (issue 37 item 1; evolve/loop/power.py)."""
    err = base_run.run_stderr
    assert "power of the prompt-promotion test" in err and "lesson +10 points" in err, err
    assert err.index("power of the prompt-promotion test") < err.index("run t: mode")
    store = base_run.store()
    try:
        recorded = store.get_run("t").config["power"]
    finally:
        store.close()
    assert recorded["look_tasks"] == [4] and recorded["samples"] == [2, 2]  # ci.toml: 2 generations, 4 x 4
    assert [r["effect_points"] for r in recorded["rows"]] == [0.0, 5.0, 10.0]
    assert recorded["pass_rates"].startswith("PRIOR") and recorded["trials"] == power.RUN_TRIALS


def test_rollouts_and_reflection_calls_are_recorded(base_run):
    purposes = dict(scalar_rows(base_run, "select purpose, count(*) from rollout group by purpose"))
    assert purposes["train"] == 2 * 4 * 4  # 2 generations x 4 tasks x G=4
    assert purposes["heldout"] >= 3 * 8 * 4
    ((n_calls,),) = scalar_rows(base_run, "select count(*) from lm_call")
    ((n_props,),) = scalar_rows(base_run, "select count(*) from prompt_version")
    # reflection ran on the failures (the CI model fails plenty) and each call was recorded
    assert n_calls >= 1 and n_props >= 2


def replay(db, ref: str) -> tuple[dict, int, str]:
    proc = db.evolve("replay", ref, "--json", check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout), proc.returncode, proc.stderr


def test_replay_reproduces_every_rollout_metric_and_hash(base_run):
    on_pg = base_run.url.startswith("postgresql")
    for ref in ("t:2",) if on_pg else ("t:1", "t:2"):  # CI time: the store is what differs on PostgreSQL
        report, code, err = replay(base_run, ref)
        assert report["ok"] and code == 0, (report, err)
        assert report["prompt_equal"] and report["weights_equal"] and report["rollouts_equal"]
        assert report["metrics_equal"] and report["n_rollouts"] > 40 and report["first_difference"] is None
    if on_pg:
        return
    human = base_run.evolve("replay", "t:0").stdout  # generation 0: its held-out evaluation is recomputed
    assert "note: generation 0 has no parent" in human and "identical" in human
    assert "rollouts 32 (completion, reward, verdict)  EQUAL" in human and "metrics  (all but timings)  EQUAL" in human


SQLITE_ONLY = pytest.mark.parametrize("module_loop_db", ["sqlite"], indirect=True)


@SQLITE_ONLY
def test_replay_names_the_first_difference(base_run):
    """Tamper with one recorded completion: replay must notice, exit 1 and say where."""
    engine = create_engine(base_run.url)
    original = fingerprint(base_run, "t:2")
    store = base_run.store()
    first = store.rollouts(store.resolve_generation("t:2").id)[0]
    store.close()
    try:
        with engine.begin() as conn:
            conn.execute(text("update rollout set completion = :c where id = :i"), {"c": "tampered", "i": first.id})
        report, code, _ = replay(base_run, "t:2")
        assert code == 1 and not report["ok"] and not report["rollouts_equal"] and report["metrics_equal"]
        assert report["first_difference"].startswith("rollout 0 (train ") and "'tampered'" in report["first_difference"]
    finally:
        with engine.begin() as conn:
            conn.execute(text("update rollout set completion = :c where id = :i"), {"c": first.completion, "i": first.id})
        engine.dispose()
    assert fingerprint(base_run, "t:2") == original


def test_metric_differences_are_found_and_timings_ignored():
    from evolve.loop.fingerprint import first_metric_difference

    a = {"heldout": {"pass@1": 0.25}, "update": {"loss": 0.1, "seconds": 1.0}, "timings": {"total": 3.0}}
    assert first_metric_difference(a, {**a, "timings": {"total": 9.0},
                                       "update": {"loss": 0.1, "seconds": 2.0}}) is None
    assert first_metric_difference(a, {**a, "heldout": {"pass@1": 0.5}}) == (
        "metric heldout.pass@1: recorded 0.25 replayed 0.5")
    assert first_metric_difference(a, {**a, "extra": 1}).startswith("metric extra:")


def test_resume_then_fork_keeps_the_original_branch(base_run):
    before = {g["name"]: g for g in lineage(base_run, "t")}
    base_run.evolve("resume", "t", "--generations", "1")
    base_run.evolve("resume", "t", "--from", "t:1", "--generations", "1")
    after = {g["name"]: g for g in lineage(base_run, "t")}
    assert after["t:3"]["parent"] == "t:2"  # resume continues the newest
    assert after["t:4"]["parent"] == "t:1"  # the fork branches from t:1
    for name, g in before.items():  # the original branch is untouched
        assert (after[name]["prompt_version"], after[name]["weights_version"], after[name]["status"]) == (
            g["prompt_version"], g["weights_version"], g["status"])
    assert base_run.evolve("check", "t").returncode == 0


@SQLITE_ONLY
def test_report_writes_plots_and_summary(base_run, tmp_path):
    """The run page's charts as standalone SVG files (well-formed XML, one point per generation)."""
    import xml.etree.ElementTree as ET

    out = tmp_path / "report"
    base_run.evolve("report", "t", "--out", str(out))
    svg = "{http://www.w3.org/2000/svg}"
    # held-out pass@k is measured at generations 0..2; train reward and attribution from generation 1 on
    for name, points in (("heldout_passk.svg", 3), ("train_reward.svg", 2), ("all_fail.svg", 2),
                         ("attribution.svg", 2)):
        root = ET.parse(out / name).getroot()
        assert root.tag == f"{svg}svg" and root.find(f"{svg}polyline") is not None, name
        assert len(root.findall(f"{svg}circle")) >= points, name
    tree = ET.parse(out / "generations.svg").getroot()  # one node per generation, forks too (an earlier
    assert len(tree.findall(f".//{svg}circle")) == len(lineage(base_run, "t"))  # test in this module forks t)
    summary = (out / "summary.md").read_text()
    assert "| 2 | 1 |" in summary and "which lever removed them" in summary
    assert "![heldout_passk](heldout_passk.svg)" in summary and "## Prompt lineage" in summary


@pytest.mark.parametrize("content, needle", [
    ("[loop]\nmode = 'sideways'\n", "mode: Input should be 'coupled', 'weights' or 'prompt'"),
    ("[loop]\nbogus_key = 1\n", "unknown key 'bogus_key'"),
    ("[loop\nmode=", "malformed TOML"),
    ("[loop]\ngate_rule = 'coin'\n", "unknown key 'gate_rule'"),
    ("[loop.selection]\nevict_below = 1.5\n", "selection.evict_below: Input should be less than 1"),
    ("[loop]\nselection_score = 'vibes'\n", "unknown key 'selection_score'"),
    ("[loop.selection]\ntype = 'gate'\ngate_alpha = 0\n", "selection.gate_alpha: Input should be greater than 0"),
    ("[loop.selection]\nval_tasks = 2\n", "unknown key 'selection.val_tasks': not a setting of type 'in_group'"),
    ("[loop]\nselection = 'gate'\n", "selection: Input should be a valid dictionary"),
    ("[loop]\nlr = 0.001\n", "unknown key 'lr'; it belongs in policy.optimizer.lr"),  # a foreign key
    ("[loop]\nsamples_per_task = '8'\n", "samples_per_task: Input should be a valid integer"),  # a bad type
    ("[loop]\nproposals_per_generation = 2\n", "proposals_per_generation is now prompt.proposals_per_step"),
])
def test_malformed_config_gives_one_line(tmp_path, content, needle):
    from loop_helpers import LoopDB

    cfg = tmp_path / "bad.toml"
    cfg.write_text(content)
    proc = LoopDB(f"sqlite:///{tmp_path / 'l.db'}").evolve("run", "--config", str(cfg), check=False, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "l.db").exists()  # nothing written


def test_a_bad_pipeline_file_stops_the_run_before_anything_is_written(tmp_path):
    from loop_helpers import LoopDB

    pipe = tmp_path / "pipe.toml"
    pipe.write_text('[[stages]]\nname = "hidden"\nrequird = false\n')  # a misspelt key, once a silent option
    cfg = tmp_path / "run.toml"
    cfg.write_text(f"[loop]\npipeline = '{pipe}'\n")
    proc = LoopDB(f"sqlite:///{tmp_path / 'l.db'}").evolve("run", "--config", str(cfg), check=False, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0] == f"error: {pipe}: unknown key 'stages.0.requird' (stage 'hidden' takes name, weight and required)"
    assert not (tmp_path / "l.db").exists() and proc.stdout == ""  # nothing written, nothing announced
