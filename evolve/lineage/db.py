"""Opening a lineage database: URL resolution, engine set-up, schema-version checks, migrations.

Every failure a user can cause (a missing or corrupt file, an unreachable server,
a schema newer than this code) becomes a one-line :class:`LineageError`, and a
read-only open never writes anything.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError

from evolve.errors import LineageError
from evolve.lineage.tables import KNOWN_REVISIONS, SCHEMA_HEAD

DEFAULT_URL = "sqlite:///runs/lineage.db"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"


@dataclass(frozen=True)
class Target:
    """A resolved database location."""

    url: URL
    sqlite_path: Path | None  # the file, for SQLite on disk; None otherwise

    @property
    def label(self) -> str:
        """How messages name the database (a path, or the URL without its password)."""
        if self.sqlite_path is not None:
            return str(self.sqlite_path)
        return self.url.render_as_string(hide_password=True)


def resolve_url(db: str | None = None) -> Target:
    """``--db`` (a URL, or a plain path meaning SQLite) > ``$EVOLVE_DB`` > ``sqlite:///runs/lineage.db``."""
    raw = db or os.environ.get("EVOLVE_DB") or DEFAULT_URL
    if "://" not in raw:
        raw = "sqlite:///" + str(Path(raw).expanduser())
    try:
        url = make_url(raw)
    except ArgumentError as e:
        raise LineageError(f"not a database URL: {raw!r} ({e})") from None
    if url.drivername in ("postgresql", "postgres"):  # plain postgresql:// means psycopg2; use psycopg 3 if that is all
        import importlib.util

        if importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg") is not None:
            url = url.set(drivername="postgresql+psycopg")
    path = None
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:" \
            and not url.database.startswith("file:"):
        path = Path(url.database).expanduser().absolute()
        url = url.set(database=str(path))
    return Target(url, path)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def make_engine(target: Target) -> Engine:
    kwargs: dict = {}
    if target.url.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
        if target.url.get_backend_name() == "postgresql":
            kwargs["connect_args"] = {"connect_timeout": 5}
    try:
        engine = create_engine(target.url, **kwargs)
    except (NoSuchModuleError, ImportError, ArgumentError) as e:
        raise LineageError(f"cannot use database URL {target.label}: {_first_line(e)}") from None
    if target.url.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _first_line(e: BaseException) -> str:
    msg = str(getattr(e, "orig", None) or e).strip()
    return msg.splitlines()[0] if msg else type(e).__name__


def connection_error(target: Target, e: BaseException) -> LineageError:
    """A driver error while opening, as one line naming the database."""
    if target.sqlite_path is not None:
        return LineageError(f"{target.label} is not a lineage database ({_first_line(e)})")
    host = target.url.host or "localhost"
    port = f":{target.url.port}" if target.url.port else ""
    return LineageError(f"cannot connect to database at {host}{port}: {_first_line(e)}")


def current_revision(engine: Engine, target: Target) -> str | None:
    """The schema revision stamped in the database; None for an empty database.

    Raises LineageError if the database is unreachable, not a database, or holds
    tables without an Alembic stamp (someone else's database).
    """
    try:
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
            if "alembic_version" not in names:
                if names:
                    raise LineageError(f"{target.label} is not a lineage database (no schema version; "
                                       f"tables: {', '.join(sorted(names)[:5])})")
                return None
            revs = [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))]
    except (OperationalError, DatabaseError) as e:
        raise connection_error(target, e) from None
    if len(revs) != 1:
        raise LineageError(f"{target.label} has {len(revs)} schema versions stamped; expected one")
    return revs[0]


def check_revision(rev: str | None, target: Target, auto_upgrade: bool) -> bool:
    """True if the database must be migrated; a LineageError if it cannot be used as is."""
    if rev == SCHEMA_HEAD:
        return False
    if rev is not None and rev not in KNOWN_REVISIONS:
        raise LineageError(f"database schema {rev} of {target.label} is newer than this evolve "
                           f"(head {SCHEMA_HEAD}); upgrade evolve")
    if not auto_upgrade:
        if rev is None:
            raise LineageError(f"{target.label} is not a lineage database (empty)")
        raise LineageError(f"database schema of {target.label} is at {rev} (head {SCHEMA_HEAD}), "
                           f"run `evolve db upgrade`")
    return True


def alembic_config():
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def upgrade(engine: Engine, target: Target, revision: str = "head") -> None:
    """Migrate to ``revision`` (head by default) in one transaction; enables WAL on SQLite."""
    from alembic import command

    cfg = alembic_config()
    try:
        with engine.connect() as conn:
            sqlite = conn.dialect.name == "sqlite"
            if sqlite:  # table copies in SQLite migrations must not trip foreign keys midway
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
                conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
                conn.commit()
            with _migration_transaction(conn):
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)  # reads the stamped revision again, under the lock
                if sqlite and conn.exec_driver_sql("PRAGMA foreign_key_check").first() is not None:
                    raise LineageError(f"migrating {target.label} broke a foreign key; nothing was changed")
            if sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()
    except (OperationalError, DatabaseError) as e:
        raise LineageError(f"cannot migrate {target.label}: {_first_line(e)}") from None


@contextmanager
def migration_lock(target: Target):
    """SQLite: one process at a time reads the schema version again and migrates (a blocking ``flock`` on
    ``<db file>.schema.lock``, taken only when a migration looks needed, so a current or foreign database
    gets no file beside it). Without it, processes opening a fresh file at once raced between the version
    read and the migration (``table run already exists``) or met one mid-way (``database is locked``).
    PostgreSQL needs no file: its migration holds an advisory lock (below)."""
    if target.sqlite_path is None:
        yield
        return
    import fcntl

    fd = os.open(target.sqlite_path.with_name(f"{target.sqlite_path.name}.schema.lock"), os.O_RDWR | os.O_CREAT,
                 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock (so does a kill)


@contextmanager
def _migration_transaction(conn):
    """One transaction for the whole migration, holding the database's write lock from its start, so
    that a second process opening the database at the same moment waits, then finds it migrated.

    - SQLite: Python's sqlite3 driver opens no transaction before DDL (each CREATE TABLE committed on its
      own: a reader saw an empty ``alembic_version``, and a crash midway left a half-made schema), so
      the driver's own transaction handling is off for the block and ``BEGIN IMMEDIATE`` is issued;
    - PostgreSQL: DDL is transactional; ``pg_advisory_xact_lock`` (keyed by the schema) serialises
      migrators, whose concurrent CREATE TABLEs would otherwise fail on the catalog's unique index."""
    sqlite = conn.dialect.name == "sqlite"
    driver = conn.connection.dbapi_connection if sqlite else None
    level = driver.isolation_level if sqlite else None
    if sqlite:
        driver.isolation_level = None
    try:
        with conn.begin():
            if sqlite:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            elif conn.dialect.name == "postgresql":
                from evolve.lineage.lease import advisory_key

                key = advisory_key(f"evolve-schema|{conn.scalar(text('select current_schema()'))}")
                conn.execute(text("select pg_advisory_xact_lock(:k)"), {"k": key})
            yield
    finally:
        if sqlite:
            driver.isolation_level = level


def stamp_revision(engine: Engine, revision: str) -> None:
    """Overwrite the stamped revision (tests use it to fake a newer schema)."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
