"""One writer per run: a lock a controller holds while it writes a run's generations.

Two controllers committing to one run would interleave generation indexes and, on resume, one
would discard the other's pending generation. The lock is held by the process, not stored in a
row, so a controller that dies (kill -9, a lost node) releases it with its connection or its file
descriptor: nothing to expire, nothing to clean up.

- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) on a dedicated connection,
  keyed by (schema, run name);
- SQLite: ``flock`` on ``<db file>.<run key>.lock`` beside the database (one host by definition).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from contextlib import contextmanager

from evolve.errors import LineageError


def _busy(run: str) -> LineageError:
    return LineageError(f"run {run} is being written by another controller; wait for it to stop "
                        "(a killed controller releases the run at once)")


def advisory_key(text: str) -> int:
    """A signed 64-bit advisory-lock key."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


@contextmanager
def run_lock(store, run: str):
    """Hold the write lock of ``run`` for the block; LineageError at once if another process holds it."""
    path = store.target.sqlite_path
    if path is not None:
        with _file_lock(path.with_name(f"{path.name}.{advisory_key(run) & 0xFFFFFFFFFFFF:012x}.lock"), run):
            yield
        return
    if store.engine.dialect.name != "postgresql":
        raise LineageError(f"run locks are implemented for SQLite and PostgreSQL, not {store.engine.dialect.name}")
    with _advisory_lock(store.engine, run):
        yield


@contextmanager
def _file_lock(lock_path, run: str):
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(run) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for a human; the lock is the flock
        yield
    finally:
        os.close(fd)  # releases the flock


@contextmanager
def _advisory_lock(engine, run: str):
    from sqlalchemy import text

    conn = engine.connect()
    try:
        schema = conn.scalar(text("select current_schema()"))
        key = advisory_key(f"evolve-run|{schema}|{run}")
        if not conn.scalar(text("select pg_try_advisory_lock(:k)"), {"k": key}):
            raise _busy(run)
        conn.commit()
        try:
            yield
        finally:
            conn.scalar(text("select pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()
    finally:
        conn.close()
