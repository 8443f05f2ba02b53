"""Bad input: one line on stderr, exit 2, no traceback, nothing written."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lineage_helpers import build_fork_merge

from evolve.errors import LineageError
from evolve.lineage import SCHEMA_HEAD, LineageStore
from evolve.lineage import db as dbmod

FIXTURE = Path(__file__).parent / "fixtures" / "lineage_0001.db"
EVOLVE = str(Path(sys.executable).with_name("evolve"))
INSPECT = [["runs"], ["lineage", "demo"], ["show", "demo:1"], ["diff", "demo:0", "demo:1"], ["check"],
           ["check", "demo"]]


def _snapshot(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _one_line_error(r, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    assert "Traceback" not in r.err + r.out
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_missing_file_is_an_error_and_nothing_is_created(tmp_path, cli):
    db = tmp_path / "nowhere" / "lineage.db"
    for args in INSPECT + [["db", "upgrade"], ["db", "current"]]:
        _one_line_error(cli(*args, "--db", str(db)), f"no lineage database at {db}")
    assert not db.parent.exists()


def test_default_and_env_resolution(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVOLVE_DB", raising=False)
    _one_line_error(cli("runs"), f"no lineage database at {tmp_path / 'runs' / 'lineage.db'}")
    assert not (tmp_path / "runs").exists()
    with LineageStore.open() as s:  # a writer creates the default one
        assert s.target.sqlite_path == tmp_path / "runs" / "lineage.db" and s.runs_dir == tmp_path / "runs"
        s.create_run("here", {})
    monkeypatch.setenv("EVOLVE_DB", str(tmp_path / "other.db"))
    _one_line_error(cli("runs"), f"no lineage database at {tmp_path / 'other.db'}")
    r = cli("runs", "--json", "--db", "runs/lineage.db")  # --db beats EVOLVE_DB
    assert r.code == 0 and '"here"' in r.out


@pytest.mark.parametrize("content,needle", [
    (b"this is not sqlite at all" * 100, "is not a lineage database (file is not a database)"),
    (b"", "is not a lineage database (empty)"),
])
def test_corrupt_or_empty_file(tmp_path, cli, content, needle):
    db = tmp_path / "lineage.db"
    db.write_bytes(content)
    before = _snapshot(tmp_path)
    for args in INSPECT:
        _one_line_error(cli(*args, "--db", str(db)), str(db), needle)
    assert _snapshot(tmp_path) == before


def test_someone_elses_sqlite_database(tmp_path, cli):
    import sqlite3

    db = tmp_path / "app.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
    before = _snapshot(tmp_path)
    _one_line_error(cli("runs", "--db", str(db)), "is not a lineage database (no schema version")
    with pytest.raises(LineageError, match="no schema version"):
        LineageStore.open(str(db))  # a writer does not take it over either
    assert _snapshot(tmp_path) == before


def test_newer_schema_is_refused_by_readers_and_writers(tmp_path, cli):
    db = tmp_path / "lineage.db"
    with LineageStore.open(str(db)) as s:
        build_fork_merge(s, tmp_path)
        dbmod.stamp_revision(s.engine, "0099")
    before = _snapshot(tmp_path)
    msg = "database schema 0099 of"
    for args in INSPECT + [["db", "upgrade"]]:
        _one_line_error(cli(*args, "--db", str(db)), msg, f"is newer than this evolve (head {SCHEMA_HEAD}); upgrade evolve")
    with pytest.raises(LineageError, match="newer than this evolve"):
        LineageStore.open(str(db))
    assert _snapshot(tmp_path) == before


def test_older_schema_needs_db_upgrade_for_inspection(tmp_path, cli):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    before = _snapshot(tmp_path)
    for args in (["runs"], ["lineage", "old"], ["check"]):
        _one_line_error(cli(*args, "--db", str(db)), f"is at 0001 (head {SCHEMA_HEAD}), run `evolve db upgrade`")
    assert _snapshot(tmp_path) == before
    r = cli("db", "upgrade", "--db", str(db))
    assert r.code == 0 and r.out.strip() == f"{db}: upgraded 0001 -> {SCHEMA_HEAD}"
    assert cli("lineage", "old", "--db", str(db)).code == 0


def test_unknown_run_and_generation(store, db_url, tmp_path, cli):
    build_fork_merge(store, tmp_path)
    _one_line_error(cli("lineage", "nope", "--db", db_url), "unknown run 'nope'")
    _one_line_error(cli("check", "nope", "--db", db_url), "unknown run 'nope'")
    _one_line_error(cli("show", "demo:42", "--db", db_url), "unknown generation 'demo:42'")
    _one_line_error(cli("show", "99999", "--db", db_url), "unknown generation, prompt version or weights version '99999'")
    _one_line_error(cli("show", "nope:1", "--db", db_url), "unknown run 'nope'")
    _one_line_error(cli("show", "ffffffff", "--db", db_url), "unknown generation, prompt version or weights")
    _one_line_error(cli("show", "what?", "--db", db_url), "bad reference")
    _one_line_error(cli("diff", "demo:1", "demo:77", "--db", db_url), "unknown generation 'demo:77'")


def test_unreachable_server_and_bad_url(cli):
    url = "postgresql://someone:s3cret@127.0.0.1:1/lineage"  # plain scheme: psycopg 3 is picked
    r = cli("runs", "--db", url)
    _one_line_error(r, "cannot connect to database at 127.0.0.1:1")
    assert "s3cret" not in r.err
    _one_line_error(cli("runs", "--db", "nosuchdialect://x/y"), "cannot use database URL")


def _run_real(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVOLVE_DB": ""}
    return subprocess.run([EVOLVE, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def test_real_entry_point_prints_one_line(tmp_path):
    """Through the installed `evolve` script: the user's view of each kind of bad input."""
    (tmp_path / "junk.db").write_bytes(b"\x00garbage" * 64)
    db = tmp_path / "new.db"
    with LineageStore.open(str(db)) as s:
        build_fork_merge(s, tmp_path)
    cases = [(["lineage", "demo", "--db", "missing.db"], "no lineage database at"),
             (["runs", "--db", "junk.db"], "file is not a database"),
             (["show", "demo:9", "--db", "new.db"], "unknown generation 'demo:9'")]
    for args, needle in cases:
        p = _run_real(*args, cwd=tmp_path)
        assert p.returncode == 2, p
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ") and needle in p.stderr, p.stderr
        assert "Traceback" not in p.stderr and p.stdout == ""
    assert not (tmp_path / "missing.db").exists()
    p = _run_real("check", "--db", "new.db", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("ok: 6 generations"), p
