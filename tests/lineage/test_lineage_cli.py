"""A lineage with a fork and a merge, checked through what `lineage`, `show`, `diff` and `check` print."""

from __future__ import annotations

import json

from lineage_helpers import build_fork_merge


def test_lineage_json_has_the_tree(store, db_url, tmp_path, cli):
    b = build_fork_merge(store, tmp_path)
    r = cli("lineage", b.run, "--db", db_url, "--json")
    assert r.code == 0, r.err
    gens = json.loads(r.out)
    by_name = {g["name"]: g for g in gens}
    assert [g["name"] for g in gens] == [f"demo:{i}" for i in range(6)]
    for g in gens:
        assert {"id", "name", "parent", "prompt_version", "weights_version", "status", "metrics"} <= set(g)
        assert g["status"] == "committed"
    assert by_name["demo:0"]["parent"] is None
    assert by_name["demo:4"]["parent"] == "demo:1"  # the fork: index 4, parent 1
    assert by_name["demo:5"]["parent"] == "demo:3"
    assert sorted(by_name["demo:1"]["children"]) == ["demo:2", "demo:4"]  # branch point
    assert by_name["demo:5"]["prompt_version"] == b.pvs["p3"]
    assert by_name["demo:5"]["prompt_parents"] == 2 and by_name["demo:5"]["proposed_by"] == "merge"
    assert by_name["demo:4"]["weights_version"] == b.wvs["w4"]
    assert by_name["demo:3"]["metrics"] == {"heldout": {"pass@1": 0.5}, "train_reward": 0.25}
    assert by_name["demo:3"]["id"] == b.gens[3]


def test_lineage_human_tree_marks_branch_and_merge(store, db_url, tmp_path, cli):
    b = build_fork_merge(store, tmp_path)
    r = cli("lineage", b.run, "--db", db_url)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("run demo: 6 generations (6 committed, 0 pending, 0 failed), 1 branch points")
    body = lines[2:]
    assert body[0].startswith("demo:0  pv ") and "heldout.pass@1=0.25" in body[0]
    assert "branch point (2 children)" in body[1] and body[1].startswith("demo:1")
    # the two branches of demo:1, the first continuing as a chain at one indentation
    assert body[2].startswith("├─ demo:2") and body[3].startswith("│  demo:3")
    assert body[4].startswith("│  demo:5") and "(merge)" in body[4]
    assert body[5].startswith("└─ demo:4")
    assert f"pv {b.pvs['p1'][:8]}*" in body[1] and f"pv {b.pvs['p1'][:8]}  " in body[2]  # * = changed


def test_diff_prompt_metrics_and_weights_relation(store, db_url, tmp_path, cli):
    b = build_fork_merge(store, tmp_path)
    r = cli("diff", "demo:4", "demo:5", "--db", db_url, "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["prompt_diff"].keys() == {"lessons"}
    assert "-- Use // for integers." not in d["prompt_diff"]["lessons"]
    assert "+- Handle the empty list.\n" in d["prompt_diff"]["lessons"]
    assert d["prompt_diff"]["lessons"].startswith("--- demo:4/lessons\n+++ demo:5/lessons\n")
    deltas = {m["name"]: m for m in d["metrics"]}
    assert abs(deltas["heldout.pass@1"]["delta"] - (0.60 - 0.42)) < 1e-9
    w = d["weights_version"]  # w4 forks from w1; demo:5 has w3 = w1 -> w2 -> w3
    assert w["relation"] == "common_ancestor" and w["common"] == b.wvs["w1"]
    assert (w["steps_a"], w["steps_b"]) == (1, 2)
    assert d["generation_relation"] == {"relation": "common_ancestor", "common": "demo:1", "steps_a": 1,
                                        "steps_b": 3}

    r = cli("diff", "demo:1", "demo:3", "--db", db_url, "--json")
    d = json.loads(r.out)
    assert d["prompt_version"]["same"] and d["prompt_diff"] == {}
    assert d["weights_version"]["relation"] == "a_ancestor_of_b" and d["weights_version"]["steps"] == 2

    r = cli("diff", "demo:0", "demo:1", "--db", db_url)  # human form: a real unified diff
    assert r.code == 0, r.err
    assert "--- demo:0/lessons" in r.out and "+- Handle the empty list." in r.out
    assert "A is an ancestor of B (1 step)" in r.out
    assert "heldout.pass@1" in r.out and "+0.15" in r.out


def test_check_passes_then_catches_corruption_and_missing(store, db_url, tmp_path, cli):
    b = build_fork_merge(store, tmp_path)
    r = cli("check", "--db", db_url)
    assert r.code == 0, r.out + r.err
    assert r.out.startswith("ok: 6 generations (6 committed, 0 pending), 4 prompt versions, 5 weights versions")

    # flip one byte of a file inside w2's checkpoint folder
    art = store.artifacts(b.run)
    weights_file = art.manifest(b.ckpt["w2"])["files"]["model.safetensors"]["sha"]
    path = art.path(weights_file)
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01
    path.write_bytes(bytes(data))
    r = cli("check", b.run, "--db", db_url)
    assert r.code == 1
    bad = [line for line in r.out.splitlines() if line.startswith("violation:")]
    assert bad and all(weights_file in line and "corrupt" in line for line in bad)
    # charged to the generation using w2; w3 (a descendant) is a complete checkpoint of its own
    assert {line.split(":")[1].strip() + ":" + line.split(":")[2] for line in bad} == {"demo:2"}
    assert "model.safetensors" in bad[0]

    # a missing state blob is named too
    state = store.get_generation(b.gens[4]).state_artifact
    art.path(state).unlink()
    r = cli("check", "--db", db_url, "--json")
    assert r.code == 1
    rep = json.loads(r.out)
    assert not rep["ok"]
    assert any(v.startswith("demo:4: ") and state in v and "missing" in v for v in rep["violations"])


def test_check_catches_broken_invariants(store, db_url, tmp_path, cli):
    from sqlalchemy import text

    b = build_fork_merge(store, tmp_path)
    with store.engine.begin() as conn:  # corrupt rows behind the store's back
        conn.execute(text("UPDATE generation SET status='pending' WHERE id=:g"), {"g": b.gens[2]})
        conn.execute(text("UPDATE prompt_version SET components=:c WHERE id=:p"),
                     {"c": json.dumps({"system": "tampered"}), "p": b.pvs["p2"]})
        conn.execute(text("UPDATE weights_version SET parent=:p WHERE id=:w"), {"p": b.wvs["w3"], "w": b.wvs["w0"]})
    w = b.wvs
    assert store.weights_chain(w["w3"]) == [w["w3"], w["w2"], w["w1"], w["w0"]]  # the cycle stops the walk
    r = cli("check", "--db", db_url)
    assert r.code == 1
    assert "parent links form a cycle" in r.out
    assert f"violation: weights version {w['w0'][:12]}: its content does not hash to its id" in r.out
    assert "violation: demo:3: committed, but its parent demo:2 is pending" in r.out
    assert f"violation: prompt version {b.pvs['p2'][:12]}: its components do not hash to its id" in r.out


def test_show_generation_and_prompt_version(store, db_url, tmp_path, cli):
    b = build_fork_merge(store, tmp_path)
    r = cli("show", "demo:1", "--db", db_url, "--json")
    assert r.code == 0, r.err
    info = json.loads(r.out)
    assert info["kind"] == "generation" and info["parent"] == "demo:0"
    assert sorted(info["children"]) == ["demo:2", "demo:4"]
    assert info["prompt"]["lessons"] == "- Handle the empty list."
    assert info["weights"]["parent"] == b.wvs["w0"] and info["weights"]["artifact_sha"] == b.ckpt["w1"]
    assert info["rollouts"] == {"train": {"n": 4, "passed": 2, "mean_reward": 0.5}}
    assert info["timings"].pop("commit_verify") >= 0  # the store times its own artifact re-hash
    assert info["timings"] == {"rollout": 1.0, "update": 0.5}

    r = cli("show", str(b.gens[5]), "--db", db_url)  # by id, human form
    assert r.code == 0, r.err
    assert "generation demo:5" in r.out and "Use // for integers." in r.out and "heldout.pass@1" in r.out

    r = cli("show", b.pvs["p1"][:10], "--db", db_url, "--json")
    info = json.loads(r.out)
    assert info["kind"] == "prompt_version" and info["parents"] == [b.pvs["p0"]]
    assert info["proposed_by"] == "reflection" and info["used_by"] == ["demo:1", "demo:2", "demo:3"]
    assert info["lm_calls"][0]["role"] == "reflector"
    assert info["lm_calls"][0]["response_summary"] == "Handle the empty list."
    r = cli("show", b.pvs["p3"][:8], "--db", db_url)
    assert r.code == 0 and "merge" in r.out and b.pvs["p1"][:12] in r.out and b.pvs["p2"][:12] in r.out


def test_runs_lists_counts(store, db_url, tmp_path, cli):
    build_fork_merge(store, tmp_path)
    gid = store.begin_generation("demo", None, {})
    store.fail_generation(gid, "boom")
    store.begin_generation("demo", None, {})
    r = cli("runs", "--db", db_url, "--json")
    assert r.code == 0, r.err
    (run,) = json.loads(r.out)
    assert (run["name"], run["generations"], run["committed"], run["pending"], run["failed"]) == (
        "demo", 8, 6, 1, 1)
    assert run["latest_committed"] == 5
    r = cli("runs", "--db", db_url)
    assert r.code == 0 and "demo" in r.out


def test_show_prints_prompt_text_verbatim(store, db_url, cli):
    """Prompt text is data: Rich markup-like brackets must print as written."""
    text = "Return xs[0] if xs else None.\n[bold]not markup[/] and [/] alone."
    pv = store.put_prompt_version({"system": text, "weird[name]": "y"})
    r = cli("show", pv[:12], "--db", db_url)
    assert r.code == 0, r.err
    assert "Return xs[0] if xs else None." in r.out and "[bold]not markup[/] and [/] alone." in r.out
    assert "weird[name]" in r.out


def test_check_verifies_unreferenced_recorded_artifacts(store, db_url, tmp_path, cli):
    build_fork_merge(store, tmp_path)
    art = store.artifacts("demo")
    orphan = art.put_bytes(b"a blob no generation names")
    assert cli("check", "--db", db_url).code == 0
    art.path(orphan).write_bytes(b"bit rot")
    r = cli("check", "demo", "--db", db_url)
    assert r.code == 1
    assert f"violation: run demo: artifact {orphan} is corrupt" in r.out


def test_lineage_shows_pending_and_failed_and_can_hide_them(store, db_url, tmp_path, cli):
    b = build_fork_merge(store, tmp_path)
    failed = store.begin_generation(b.run, b.gens[5], {})
    store.fail_generation(failed, "RuntimeError: out of memory\nmore detail")
    store.begin_generation(b.run, b.gens[5], {})
    r = cli("lineage", b.run, "--db", db_url)
    assert r.code == 0, r.err
    assert "demo:6  [failed]" in r.out and "error: RuntimeError: out of memory" in r.out
    assert "demo:7  [pending]" in r.out and "more detail" not in r.out
    r = cli("lineage", b.run, "--db", db_url, "--committed", "--json")
    assert [g["name"] for g in json.loads(r.out)] == [f"demo:{i}" for i in range(6)]
    r = cli("lineage", b.run, "--db", db_url, "-m", "train_reward")
    assert "train_reward=0.3" in r.out and "heldout.pass@1" not in r.out


def test_check_names_a_broken_ancestor_checkpoint_no_generation_uses(store, db_url, tmp_path, cli):
    b = build_fork_merge(store, tmp_path)
    art = store.artifacts(b.run)
    (tmp_path / "mid").mkdir()
    (tmp_path / "mid" / "w.bin").write_bytes(b"mid")
    mid = store.put_weights_version(art.put_dir(tmp_path / "mid"), b.wvs["w3"], "tiny-coder")
    top = store.put_weights_version(None, mid, "tiny-coder", kind="base")
    gid = store.begin_generation(b.run, b.gens[5], {})
    store.commit_generation(gid, b.pvs["p3"], top)
    art.path(art.manifest(store.get_weights_version(mid).artifact_sha)["files"]["w.bin"]["sha"]).unlink()
    r = cli("check", "--db", db_url)
    assert r.code == 1
    assert f"violation: weights version {mid[:12]}: artifact " in r.out and "missing" in r.out
