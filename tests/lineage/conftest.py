"""Fixtures: a real lineage database (a SQLite file; also PostgreSQL when EVOLVE_TEST_PG_URL is set),
a fork-and-merge lineage with real artifacts, and an in-process runner of the real `evolve` entry point."""

from __future__ import annotations

import os
import sys
import uuid
from dataclasses import dataclass

import pytest

from evolve.lineage import LineageStore

PG_URL = os.environ.get("EVOLVE_TEST_PG_URL")
BACKENDS = ["sqlite"] + (["postgres"] if PG_URL else [])


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path, monkeypatch):
    """A fresh, empty database URL. On PostgreSQL each test gets its own schema, dropped after."""
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path / "lineage.db")
        return
    from sqlalchemy import create_engine, text

    schema = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    monkeypatch.setenv("EVOLVE_RUNS_DIR", str(tmp_path / "runs"))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def store(db_url):
    s = LineageStore.open(db_url)
    yield s
    s.close()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the real `evolve` entry point (evolve.cli.main) in-process; returns code, stdout, stderr."""
    from evolve.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["evolve", *args])
        code = 0
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        cap = capsys.readouterr()
        return CliResult(code, cap.out, cap.err)

    return run
