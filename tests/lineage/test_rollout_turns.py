"""Revision 0004: rollouts keep whole multi-turn transcripts; a 0003 database reads unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

from evolve.lineage import SCHEMA_HEAD, LineageStore
from evolve.lineage import db as dbmod
from evolve.loop.fingerprint import rollout_row
from evolve.rollout import Rollout, Turn
from evolve.verification.types import VerifyResult

FIXTURE = Path(__file__).parent / "fixtures" / "lineage_0001.db"


def _db_at_0003(tmp_path) -> Path:
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    target = dbmod.resolve_url(str(db))
    engine = dbmod.make_engine(target)
    dbmod.upgrade(engine, target, "0003")
    assert dbmod.current_revision(engine, target) == "0003"
    engine.dispose()
    return db


def _multi_turn(task: str) -> Rollout:
    turns = [Turn("assistant", "def f(x):\n    return 0\n", 0.5, "a" * 64, (0, 9)),
             Turn("user", "Your `f` failed 1 of the examples:\n- f([1]) expected 1, got 0"),
             Turn("assistant", "def f(x):\n    return len(x)\n", 1.0, "b" * 64, (20, 31))]
    res = VerifyResult(task, 1.0, True)
    return Rollout(task, 0, 0, "p" * 64, "w", [{"role": "user", "content": "q"}], "q", turns[-1].content,
                   res, 1.0, turns=turns, completion_mask=[1] * 9 + [0] * 11 + [1] * 11)


def test_a_0003_database_upgrades_and_reads_its_rollouts_unchanged(tmp_path):
    db = _db_at_0003(tmp_path)
    with LineageStore.open(str(db)) as store:  # a writer migrates 0003 -> head
        gens = store.lineage("old")
        (old,) = store.rollouts(gens[1]["id"])
        assert old.turns is None and rollout_row(old)[-1] == ""  # single-turn, as it always was
        assert (old.task_id, old.passed, old.truncated, old.advantage) == ("t1", True, False, 0.5)
        gid = store.begin_generation("old", gens[1]["id"], {"seed": 3})
        new = _multi_turn("t2")
        store.add_rollouts(gid, [new])
        store.commit_generation(gid, gens[1]["prompt_version"], gens[1]["weights_version"])
        (back,) = store.rollouts(gid)
    assert [t["role"] for t in back.turns] == ["assistant", "user", "assistant"]
    assert back.turns[0] == {"role": "assistant", "content": new.turns[0].content, "reward": 0.5,
                             "observation_hash": "a" * 64, "token_span": [0, 9], "advantage": None}
    assert back.turns[1]["content"] == new.turns[1].content
    assert rollout_row(back) == rollout_row(new) and rollout_row(back)[-1] != ""  # replay compares transcripts
    target = dbmod.resolve_url(str(db))
    engine = dbmod.make_engine(target)
    assert dbmod.current_revision(engine, target) == SCHEMA_HEAD  # 0004 or later
    engine.dispose()


def test_a_changed_turn_changes_the_fingerprint():
    a, b = _multi_turn("t"), _multi_turn("t")
    b.turns[1].content += " "
    assert rollout_row(a) != rollout_row(b)
    b = _multi_turn("t")
    b.turns[0].reward = 0.25
    assert rollout_row(a) != rollout_row(b)


def test_transcripts_round_trip_on_every_backend(db_url):
    """SQLite and (when configured) PostgreSQL keep a transcript as written, odd text included."""
    r = _multi_turn("t")
    r.turns[1].content = "NUL\x00 BEL\x07 lone \ud800 surrogate \ue000 and 'quotes'"
    with LineageStore.open(db_url) as store:
        store.create_run("mt", {})
        pv = store.put_prompt_version({"system": "s"})
        wv = store.put_weights_version(None, None, "m", kind="base")
        gid = store.begin_generation("mt", None, {})
        store.add_rollouts(gid, [r])
        store.commit_generation(gid, pv, wv)
        (back,) = store.rollouts(gid)
    assert back.turns[1]["content"] == r.turns[1].content and rollout_row(back) == rollout_row(r)
