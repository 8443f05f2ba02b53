"""The paged read queries behind `evolve ui` (evolve.lineage.pages), on SQLite and, when
EVOLVE_TEST_PG_URL is set, PostgreSQL: a lineage written through the real LineageStore API."""

from __future__ import annotations

import os
import uuid

import pytest

from evolve.lineage import LineageStore, pages
from evolve.rollout import Rollout
from evolve.verification.types import StageResult, VerifyResult

PG_URL = os.environ.get("EVOLVE_TEST_PG_URL")


@pytest.fixture(params=["sqlite"] + (["postgres"] if PG_URL else []))
def store(request, tmp_path, monkeypatch):
    if request.param == "sqlite":
        s = LineageStore.open("sqlite:///" + str(tmp_path / "l.db"))
        yield s
        s.close()
        return
    from sqlalchemy import create_engine, text

    schema = "ui_" + uuid.uuid4().hex[:12]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    monkeypatch.setenv("EVOLVE_RUNS_DIR", str(tmp_path / "runs"))
    sep = "&" if "?" in PG_URL else "?"
    s = LineageStore.open(f"{PG_URL}{sep}options=-csearch_path%3D{schema}")
    try:
        yield s
    finally:
        s.close()
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def rollout(task: str, pv: str, wv: str, passed: bool, i: int, purpose: str = "train") -> Rollout:
    cls = None if passed else ("WrongAnswer" if i % 2 else "SyntaxError")
    res = VerifyResult(task, float(passed), passed, [StageResult("hidden", float(passed), passed, error_class=cls)],
                       trace="" if passed else "boom", error_class=cls)
    return Rollout(task, i // 2, i % 2, pv, wv, [], "p", f"def f(): return {i}", result=res, reward=float(passed),
                   purpose=purpose)


def build(store, n: int = 7) -> dict:
    """Run `r`: a chain 0..n-2 plus a fork n-1 from 2; each generation a new prompt proposal (kept on
    even indices), one reflection call, 6 rollouts, pass@1 = index / 10."""
    store.create_run("r", {"loop": {"mode": "coupled", "heldout_ks": [1, 4]}, "verifier_isolation": "rlimits"})
    seed = store.put_prompt_version({"system": "S", "lessons": ""}, proposed_by="seed")
    ids, pv_of, wv_of = {}, {}, {}
    for i in range(n):
        parent = None if i == 0 else (2 if i == n - 1 else i - 1)
        gid = store.begin_generation("r", ids.get(parent), {})
        base = pv_of.get(parent, seed)
        wv = store.put_weights_version(None, wv_of.get(parent), f"m{i}", kind="full")
        pv = base
        if i:
            cid = store.record_lm_call("reflection", "offline", {"i": i}, {"ok": i}, generation_id=gid)
            new = store.put_prompt_version({"system": "S", "lessons": f"lesson {i}"}, parents=[base],
                                           proposed_by="reflection", lm_call_ids=[cid],
                                           meta={"generation": i, "accepted": i % 2 == 0})
            pv = new if i % 2 == 0 else base
        store.add_rollouts(gid, [rollout(f"t{k % 3}", pv, wv, k < 2, k) for k in range(6)])
        store.commit_generation(gid, pv, wv, metrics={
            "heldout": {"pass@1": i / 10, "pass@4": min(1, i / 5)}, "train_reward": i / 20,
            "routing": {"groups": 4, "all_fail": i % 4}, "attribution": {"delta_weights": 0.01, "delta_prompt": -0.01}})
        ids[i], pv_of[i], wv_of[i] = gid, pv, wv
    return {"ids": ids, "pv": pv_of, "wv": wv_of, "run_id": store.run_id("r")}


def test_runs_and_generation_pages(store):
    b = build(store)
    (r,) = pages.runs_overview(store)
    assert (r["name"], r["mode"], r["isolation"], r["generations"], r["latest"]) == ("r", "coupled", "rlimits", 7, 6)
    assert r["latest_pass1"] == pytest.approx(0.6)
    rows, total = pages.generations_page(store, b["run_id"], 0, 4)
    assert total == 7 and [x["index"] for x in rows] == [0, 1, 2, 3]
    assert rows[2]["children"] == [3, 6] and not rows[2]["fork"]
    assert [x["prompt_changed"] for x in rows] == [True, False, True, False]
    assert all(x["weights_changed"] for x in rows)
    rows, _ = pages.generations_page(store, b["run_id"], 4, 4)
    assert [(x["index"], x["parent_index"], x["fork"]) for x in rows] == [(4, 3, False), (5, 4, False), (6, 2, True)]
    assert rows[2]["pass1"] == pytest.approx(0.6) and rows[2]["train_reward"] == pytest.approx(0.3)


def test_curves_and_buckets(store):
    b = build(store)
    c = pages.curves(store, b["run_id"], [1, 4])
    assert c["x"] == list(range(7)) and not c["bucketed"]
    assert c["series"]["pass@1"] == pytest.approx([i / 10 for i in range(7)])
    assert c["series"]["pass@4"] == pytest.approx([min(1, i / 5) for i in range(7)])
    assert c["series"]["all_fail_share"] == pytest.approx([(i % 4) / 4 for i in range(7)])
    c = pages.curves(store, b["run_id"], [1], max_points=3)  # 7 points in buckets of 3: means of 0-2, 3-5, 6
    assert c["bucketed"] and c["x"] == pytest.approx([1, 4, 6])
    assert c["series"]["pass@1"] == pytest.approx([0.1, 0.4, 0.6])


def test_prompt_dag_page(store):
    b = build(store)
    dag = pages.prompt_dag_page(store, b["run_id"], 0, 3)  # generations 0..2: seed, lesson 1, lesson 2
    # newest first by the generation that proposed or used it: lesson 2 (2), then seed and lesson 1 (1)
    assert [p["meta"].get("generation") for p in dag] == [2, None, 1]
    assert dag[0]["changes"] == [("lessons", "+", "lesson 2")] and dag[0]["accepted"] is True
    assert dag[0]["first_used"] == 2 and dag[1]["first_used"] == 0 and dag[1]["proposed_by"] == "seed"
    assert dag[2]["accepted"] is False and len(dag[2]["lm_calls"]) == 1 and dag[2]["first_used"] is None
    dag = pages.prompt_dag_page(store, b["run_id"], 5, 7)  # 5 and the fork 6 (from 2: its parent is lesson 2)
    assert {p["meta"].get("generation") for p in dag} >= {5, 6}
    six = next(p for p in dag if p["meta"].get("generation") == 6)
    assert six["parents"] == [b["pv"][2]] and six["changes"] == [("lessons", "-", "lesson 2"),
                                                                 ("lessons", "+", "lesson 6")]


def test_rollouts_page_filters(store):
    b = build(store)
    gid = b["ids"][3]
    f = pages.rollout_filters(store, gid)
    assert f == {"task": ["t0", "t1", "t2"], "cls": ["SyntaxError", "WrongAnswer"], "purpose": ["train"]}
    rows, total = pages.rollouts_page(store, gid, {}, 0, 4)
    assert total == 6 and len(rows) == 4 and rows[0]["completion"] == "def f(): return 0"
    assert pages.rollouts_page(store, gid, {}, 4, 4)[0][-1]["completion"] == "def f(): return 5"
    assert pages.rollouts_page(store, gid, {"passed": "pass"})[1] == 2
    assert pages.rollouts_page(store, gid, {"passed": "fail", "cls": "WrongAnswer"})[1] == 2
    assert pages.rollouts_page(store, gid, {"cls": "-"})[1] == 2  # no class: the passing ones
    assert pages.rollouts_page(store, gid, {"task": "t1"})[1] == 2
    assert pages.rollouts_page(store, gid, {"pv": b["pv"][3]})[1] == 6
    assert pages.rollouts_page(store, gid, {"pv": "0" * 64})[1] == 0
    calls = pages.generation_calls(store, gid)
    assert len(calls) == 1 and calls[0]["proposals"][0]["meta"]["generation"] == 3
    c = pages.lm_call(store, calls[0]["id"])
    assert (c["request"], c["response"], c["index"]) == ({"i": 3}, {"ok": 3}, 3)
