"""Helpers for the loop's tests: a lineage database: a SQLite file, and PostgreSQL too when
EVOLVE_TEST_PG_URL is set (CI starts one with scripts/start_postgres.sh). Each PostgreSQL
test gets its own schema, dropped afterwards, and its own runs folder for artifacts."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import evolve_zygote
import pytest

REPO = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get("EVOLVE_TEST_PG_URL")
BACKENDS = ["sqlite"] + (["postgres"] if PG_URL else [])
CI_CONFIG = str(REPO / "configs" / "ci.toml")


@dataclass
class LoopDB:
    """A database URL plus the environment the `evolve` subprocesses need to use it."""

    url: str
    env: dict = field(default_factory=dict)

    def evolve(self, *args: str, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
        proc = evolve_zygote.run([*args, "--db", self.url], {**os.environ, **self.env}, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"evolve {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args: str, log: Path | None = None) -> subprocess.Popen:
        return evolve_zygote.popen([*args, "--db", self.url], {**os.environ, **self.env}, log=log)

    def store(self):
        from evolve.lineage import LineageStore

        old = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)  # the store finds PostgreSQL runs' artifacts through EVOLVE_RUNS_DIR
        try:
            return LineageStore.open(self.url, create=False, auto_upgrade=False)
        finally:
            for k, v in old.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)

    def statuses(self, run: str) -> list[str]:
        """Generation statuses of ``run`` in index order ([] while the run does not exist yet)."""
        from sqlalchemy import create_engine, text

        if self.url.startswith("sqlite:///") and not Path(self.url[len("sqlite:///"):]).exists():
            return []
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                return list(conn.scalars(text(
                    "select g.status from generation g join run r on r.id = g.run_id where r.name = :n "
                    "order by g.\"index\""), {"n": run}))
        except Exception:  # noqa: BLE001 - the schema may not exist yet while the run starts
            return []
        finally:
            engine.dispose()


def _created(db: LoopDB) -> LoopDB:
    """Create the schema first, so two runs started at once do not both migrate an empty database."""
    from evolve.lineage import LineageStore

    LineageStore.open(db.url).close()
    return db


def make_loop_db(kind: str, folder: Path):
    """Yields a LoopDB on ``kind`` ("sqlite" or "postgres") inside ``folder``."""
    if kind == "sqlite":
        yield _created(LoopDB(f"sqlite:///{folder / 'lineage.db'}"))
        return
    from sqlalchemy import create_engine, text

    schema = "loop_" + uuid.uuid4().hex[:12]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    runs = folder / "runs"
    runs.mkdir()
    (runs / "models").symlink_to(REPO / "runs" / "models")  # the built models are shared, not rebuilt
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield _created(LoopDB(f"{PG_URL}{sep}options=-csearch_path%3D{schema}", {"EVOLVE_RUNS_DIR": str(runs)}))
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def kill9_when(db: LoopDB, run: str, args: list[str], committed: int, limit_s: float = 400) -> None:
    """Start `evolve ARGS`, wait until ``committed`` generations are committed and the next one is
    pending (being computed), then kill -9 the whole process group."""
    proc = db.popen(*args)
    try:
        wait_pending(db, run, committed, proc, limit_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()


def wait_pending(db: LoopDB, run: str, committed: int, proc, limit_s: float = 400) -> None:
    """Wait until ``committed`` generations of ``run`` are committed and the next one is pending."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        statuses = db.statuses(run)
        if statuses.count("committed") >= committed and "pending" in statuses:
            return
        assert proc.poll() is None, f"the run ended before it could be killed ({statuses})"
        time.sleep(0.1)
    pytest.fail(f"generation {committed} never started")


def fingerprints(db: LoopDB, run: str, committed_only: bool = False) -> list[dict]:
    """Every generation of ``run`` as comparable data (evolve.loop.fingerprint), in index order
    (``committed_only``: without a killed run's pending one, which has no weights yet)."""
    from evolve.loop.fingerprint import generation_fingerprint

    store = db.store()
    try:
        return [generation_fingerprint(store, store.resolve_generation(g["name"])) for g in store.lineage(run)
                if not committed_only or g["status"] == "committed"]
    finally:
        store.close()


def fingerprints_by_index(db: LoopDB, run: str) -> dict[int, dict]:
    """``fingerprints`` keyed by generation index (a fork's generations keep their own indices)."""
    from evolve.loop.fingerprint import generation_fingerprint

    store = db.store()
    try:
        return {g["index"]: generation_fingerprint(store, store.resolve_generation(g["name"]))
                for g in store.lineage(run)}
    finally:
        store.close()


def straight_and_resumed(db: LoopDB, config: Path | str) -> LoopDB:
    """Run ``config`` 2 generations straight ("straight"), and 1 + resume 1 ("cut")."""
    db.evolve("run", "--config", str(config), "--name", "straight", "--generations", "2")
    db.evolve("run", "--config", str(config), "--name", "cut", "--generations", "1")
    db.evolve("resume", "cut", "--generations", "1")
    return db


def typed_keys(typed_dict: type) -> set[str]:
    """Every key a TypedDict declares (evolve/metrics.py), required or not."""
    return set(typed_dict.__required_keys__) | set(typed_dict.__optional_keys__)  # type: ignore[attr-defined]
