"""Alembic migrations: a frozen 0001 database upgrades with its data; the models match the migrated schema."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evolve.lineage import SCHEMA_HEAD, Base, LineageStore
from evolve.lineage import db as dbmod
from evolve.lineage.models import KNOWN_REVISIONS

FIXTURE = Path(__file__).parent / "fixtures" / "lineage_0001.db"


def test_frozen_0001_fixture_upgrades_and_keeps_its_data(tmp_path, cli):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    target = dbmod.resolve_url(str(db))
    engine = dbmod.make_engine(target)
    assert dbmod.current_revision(engine, target) == "0001"
    engine.dispose()
    with LineageStore.open(str(db)) as store:  # a writer upgrades automatically
        gens = store.lineage("old")
        assert [(g["name"], g["parent"]) for g in gens] == [("old:0", None), ("old:1", "old:0")]
        # 0002 moved timings out of metrics into their own column
        assert gens[0]["metrics"] == {"heldout_pass@1": 0.25}
        assert store.get_generation(gens[0]["id"]).timings == {"total": 3.5}
        assert store.get_generation(gens[1]["id"]).timings == {"total": 4.0}
        (r,) = store.rollouts(gens[1]["id"])
        assert (r.task_id, r.passed, r.truncated, r.advantage) == ("t1", True, False, 0.5)
        assert store.get_run("old").config == {"seed": 1}
        assert store.prompt_parents(gens[1]["prompt_version"]) == [gens[0]["prompt_version"]]
        # and the upgraded database takes new generations
        gid = store.begin_generation("old", gens[1]["id"], {"seed": 3})
        store.commit_generation(gid, gens[1]["prompt_version"], gens[1]["weights_version"], metrics={"x": 1})
    r = cli("check", "--db", str(db), "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["committed"] == 3
    r = cli("db", "upgrade", "--db", str(db))
    assert r.code == 0 and r.out.strip() == f"{db}: already at head {SCHEMA_HEAD}"
    r = cli("db", "current", "--db", str(db), "--json")
    assert json.loads(r.out) == {"database": str(db), "revision": SCHEMA_HEAD, "head": SCHEMA_HEAD}


def test_models_match_the_migrated_schema(db_url):
    """Autogenerate finds nothing to change: models.py and the migrations describe one schema."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with LineageStore.open(db_url) as store, store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diffs == []


def test_schema_head_constant_matches_the_scripts():
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(dbmod.alembic_config())
    assert scripts.get_current_head() == SCHEMA_HEAD
    assert sorted(s.revision for s in scripts.walk_revisions()) == sorted(KNOWN_REVISIONS)


def test_db_upgrade_create_makes_a_new_database(tmp_path, cli):
    db = tmp_path / "sub" / "fresh.db"
    r = cli("db", "upgrade", "--db", str(db), "--create")
    assert r.code == 0 and r.out.strip() == f"{db}: upgraded (empty) -> {SCHEMA_HEAD}"
    r = cli("runs", "--db", str(db), "--json")
    assert r.code == 0 and json.loads(r.out) == []
