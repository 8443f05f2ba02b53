"""Revision 0005: a guided retry keeps its guidance sources; a 0004 database reads unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

from evolve.lineage import SCHEMA_HEAD, LineageStore
from evolve.lineage import db as dbmod
from evolve.rollout import Rollout
from evolve.verification.types import VerifyResult

FIXTURE = Path(__file__).parent / "fixtures" / "lineage_0001.db"


def test_a_0004_database_upgrades_and_stores_guidance_sources(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    target = dbmod.resolve_url(str(db))
    engine = dbmod.make_engine(target)
    dbmod.upgrade(engine, target, "0004")
    engine.dispose()
    with LineageStore.open(str(db)) as store:  # a writer migrates 0004 -> head
        gens = store.lineage("old")
        (old,) = store.rollouts(gens[1]["id"])
        assert old.guidance is None  # written before guided retries existed: unguided
        gid = store.begin_generation("old", gens[1]["id"], {"seed": 3})
        guided = Rollout("t2", 0, 4, "p" * 64, "w", [{"role": "user", "content": "q\n\nLessons:\n- x"}], "q", "c",
                         VerifyResult("t2", 1.0, True), 1.0, purpose="guided", guidance=["visible_diff", "lessons"])
        plain = Rollout("t2", 0, 0, "p" * 64, "w", [{"role": "user", "content": "q"}], "q", "c",
                        VerifyResult("t2", 0.0, False), 0.0)
        store.add_rollouts(gid, [plain, guided])
        store.commit_generation(gid, gens[1]["prompt_version"], gens[1]["weights_version"])
        back = {r.sample_index: r for r in store.rollouts(gid)}
        assert back[4].guidance == ["visible_diff", "lessons"] and back[4].purpose == "guided"
        assert back[0].guidance is None
        assert [r.sample_index for r in store.rollouts(gid, purpose="guided")] == [4]
    engine = dbmod.make_engine(target)
    assert dbmod.current_revision(engine, target) == SCHEMA_HEAD == "0005"
    engine.dispose()
