"""LineageStore round trips on a real database: runs, versions, lm calls, rollouts, commit atomicity."""

from __future__ import annotations

import pytest
from lineage_helpers import build_fork_merge, make_rollout

from evolve.errors import LineageError
from evolve.lineage import LineageStore
from evolve.prompt.candidate import Candidate
from evolve.util.hashing import content_hash


def test_run_round_trip_records_versions(store):
    run = store.create_run("r1", {"lr": 1e-4, "nested": {"k": [1, 2]}})
    got = store.get_run("r1")
    assert got.id == run.id and got.config == {"lr": 1e-4, "nested": {"k": [1, 2]}}
    assert got.package_versions["sqlalchemy"].startswith("2.") and got.code_version
    with pytest.raises(LineageError, match="already exists"):
        store.create_run("r1", {})
    with pytest.raises(LineageError, match="bad run name"):
        store.create_run("a:b", {})
    with pytest.raises(LineageError, match="unknown run 'nope'"):
        store.get_run("nope")


def test_prompt_version_identity_matches_candidate_and_is_idempotent(store):
    comps = {"system": "Write Python.", "lessons": "- x"}
    pv = store.put_prompt_version(comps)
    assert pv == Candidate(comps).id
    assert store.put_prompt_version(dict(comps), proposed_by="reflection") == pv
    assert store.get_prompt_version(pv).proposed_by == "seed"  # first writer wins
    child = store.put_prompt_version({"system": "Write Python!"}, parents=[pv, pv], proposed_by="reflection")
    assert store.prompt_parents(child) == [pv]
    # the same text proposed again from a different parent keeps its first parents: no cycle
    assert store.put_prompt_version(comps, parents=[child]) == pv
    assert store.prompt_parents(pv) == []
    with pytest.raises(LineageError, match="unknown parent prompt version"):
        store.put_prompt_version({"system": "z"}, parents=["ab" * 32])
    assert store.resolve_prompt_version(pv[:8]).id == pv


def test_weights_version_id_and_chain(store):
    w0 = store.put_weights_version(None, None, "tiny", kind="base")
    assert w0 == content_hash({"artifact_sha": None, "parent": None, "base_model": "tiny", "kind": "base"})
    w1 = store.put_weights_version("a" * 64, w0, "tiny", stats={"weights_sha256": "b" * 64, "loss": 1.5})
    assert store.get_weights_version(w1).weights_sha256 == "b" * 64
    assert store.get_weights_version(w1).stats["loss"] == 1.5
    assert store.put_weights_version("a" * 64, w0, "tiny") == w1
    assert store.weights_chain(w1) == [w1, w0]
    with pytest.raises(LineageError, match="unknown parent weights version"):
        store.put_weights_version("c" * 64, "d" * 64, "tiny")


def test_lm_call_replay_cache_returns_latest_success(store):
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    first = store.record_lm_call("reflector", "m", req, {"text": "one"}, tokens={"total": 3}, latency_s=0.1)
    second = store.record_lm_call("reflector", "m", dict(req), {"text": "two"})
    store.record_lm_call("reflector", "m", req, None, error="timeout")
    hit = store.find_lm_call(content_hash(req))
    assert hit.id == second and hit.response == {"text": "two"} and first < second
    assert store.find_lm_call(content_hash({"other": 1})) is None
    pv = store.put_prompt_version({"system": "s"}, proposed_by="reflection", lm_call_ids=[first, second])
    assert [c.id for c in store.lm_calls_for_prompt(pv)] == [first, second]


def test_rollouts_bulk_insert_round_trip(store):
    store.create_run("r", {})
    pv = store.put_prompt_version({"system": "s"})
    wv = store.put_weights_version(None, None, "tiny", kind="base")
    gid = store.begin_generation("r", None, {"seed": 1})
    rs = [make_rollout(f"t{i}", pv, wv, i % 3 == 0, i, purpose="heldout" if i >= 900 else "train")
          for i in range(1000)]
    assert store.add_rollouts(gid, rs) == 1000
    got = store.rollouts(gid)
    assert len(got) == 1000 and len(store.rollouts(gid, purpose="heldout")) == 100
    r0, r1 = got[0], got[1]
    assert (r0.task_id, r0.group, r0.sample_index, r0.passed, r0.reward, r0.advantage) == ("t0", 0, 0, True, 1.0, 0.5)
    assert r1.error_class == "WrongAnswer" and r1.trace == "f([]) expected 0, got None"
    assert r1.stages[1]["failures"][0]["error_type"] == "WrongAnswer" and r1.stages[0]["name"] == "compile"
    assert got[3].truncated and not got[2].truncated
    assert r0.prompt == "<user>write f" and r0.completion.startswith("def f")


def test_generation_index_is_a_per_run_sequence_and_fork_appends(store, tmp_path):
    b = build_fork_merge(store, tmp_path)
    fork = store.begin_generation(b.run, b.gens[3], {"seed": 9})
    g = store.get_generation(fork)
    assert g.index == 6 and g.parent_id == b.gens[3] and g.status == "pending"
    assert store.resolve_generation("demo:6").id == fork
    assert store.resolve_generation(str(fork)).index == 6
    assert store.latest_committed(b.run).index == 5  # pending is not resumable
    assert [c.index for c in store.children(b.gens[1])] == [2, 4]
    for bad, msg in (("demo:99", "unknown generation 'demo:99'"), ("nope:1", "unknown run 'nope'"),
                     ("123456", "unknown generation id 123456"), ("demo:x", "bad generation name")):
        with pytest.raises(LineageError, match=msg):
            store.resolve_generation(bad)
    with pytest.raises(LineageError, match="not committed"):
        store.begin_generation(b.run, fork, {})
    store.create_run("other", {})
    with pytest.raises(LineageError, match="not in run 'other'"):
        store.begin_generation("other", b.gens[0], {})


def test_commit_refuses_missing_or_corrupt_artifacts(store, tmp_path):
    store.create_run("r", {})
    art = store.artifacts("r")
    pv = store.put_prompt_version({"system": "s"})
    d = tmp_path / "ck"
    d.mkdir()
    (d / "w.bin").write_bytes(b"weights" * 100)
    ck = art.put_dir(d)
    wv = store.put_weights_version(ck, None, "tiny")
    gid = store.begin_generation("r", None, {})
    with pytest.raises(LineageError, match="not recorded in the lineage"):
        store.commit_generation(gid, pv, wv, state_artifact="e" * 64)
    blob = art.path(art.manifest(ck)["files"]["w.bin"]["sha"])
    blob.write_bytes(b"tampered")
    with pytest.raises(LineageError, match="corrupt"):
        store.commit_generation(gid, pv, wv)
    assert store.get_generation(gid).status == "pending"
    blob.unlink()
    art.put_dir(d)  # re-put repairs the blob
    g = store.commit_generation(gid, pv, wv, metrics={"m": 1.0}, timings={"total": 2.0})
    assert g.status == "committed" and g.committed_at is not None
    assert g.timings.pop("commit_verify") >= 0 and g.timings == {"total": 2.0}  # + the store's re-hash time
    with pytest.raises(LineageError, match="only a pending one"):
        store.commit_generation(gid, pv, wv)


def test_discard_pending_removes_rows_and_keeps_committed(store, tmp_path, cli, db_url):
    b = build_fork_merge(store, tmp_path)
    gid = store.begin_generation(b.run, b.gens[5], {"seed": 1})
    store.add_rollouts(gid, [make_rollout("t", b.pvs["p3"], b.wvs["w3"], True, i) for i in range(8)])
    call = store.record_lm_call("reflector", "m", {"q": 1}, {"a": 1}, generation_id=gid)
    pv_new = store.put_prompt_version({"system": "new"}, parents=[b.pvs["p3"]], proposed_by="reflection",
                                      lm_call_ids=[call])
    gens = {g["name"]: g["status"] for g in store.lineage(b.run)}
    assert gens["demo:6"] == "pending"
    r = cli("check", "--db", db_url)
    assert r.code == 0 and "1 pending" in r.out  # a pending generation is not a violation
    assert store.discard_pending(b.run) == 1
    assert "demo:6" not in {g["name"] for g in store.lineage(b.run)}
    assert store.rollouts(gid) == [] and store.find_lm_call(content_hash({"q": 1})) is None
    assert store.lm_calls_for_prompt(pv_new) == []  # the version stays (content-addressed), its links go
    assert store.discard_pending(b.run) == 0
    assert cli("check", "--db", db_url).code == 0
    nxt = store.begin_generation(b.run, b.gens[5], {})
    assert store.get_generation(nxt).index == 6


def test_reopen_sees_everything(db_url, tmp_path):
    with LineageStore.open(db_url) as s:
        b = build_fork_merge(s, tmp_path)
    with LineageStore.open(db_url, create=False, auto_upgrade=False) as s:
        assert [g["index"] for g in s.lineage(b.run)] == list(range(6))
        assert s.get_generation(b.gens[5]).metrics["heldout"]["pass@1"] == 0.6


def test_json_values_are_normalised_the_same_on_every_backend(store):
    import numpy as np

    store.create_run("r", {"ks": (1, 4), "tags": {"b", "a"}, "lr": np.float32(0.5), "n": np.int64(3)})
    assert store.get_run("r").config == {"ks": [1, 4], "tags": ["a", "b"], "lr": 0.5, "n": 3}
    pv = store.put_prompt_version({"system": "s"})
    wv = store.put_weights_version(None, None, "tiny", kind="base")
    gid = store.begin_generation("r", None, {"seed": np.int64(7)})
    g = store.commit_generation(gid, pv, wv, metrics={"kl": float("nan"), "loss": np.float64(0.25)})
    assert g.metrics == {"kl": None, "loss": 0.25} and g.seeds == {"seed": 7}
    with pytest.raises(LineageError, match="metrics holds a value of type object"):
        store.commit_generation(store.begin_generation("r", gid, {}), pv, wv, metrics={"x": object()})
