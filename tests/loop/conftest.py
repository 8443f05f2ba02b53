"""Fixtures for the loop's tests (helpers in loop_helpers.py, imported under that unique name)."""

from __future__ import annotations

import pytest
from loop_helpers import BACKENDS, make_loop_db


@pytest.fixture(params=BACKENDS)
def loop_db(request, tmp_path, tiny_model_dir):
    yield from make_loop_db(request.param, tmp_path)


@pytest.fixture(scope="module", params=BACKENDS)
def module_loop_db(request, tmp_path_factory, tiny_model_dir):
    yield from make_loop_db(request.param, tmp_path_factory.mktemp("loopdb"))


@pytest.fixture(scope="module")
def module_sqlite_loop_db(tmp_path_factory, tiny_model_dir):
    """``module_loop_db`` on SQLite only, for modules whose subject is the loop, not the store: the
    store's PostgreSQL round trips of every record kind are tests/lineage's (both backends), the loop on
    PostgreSQL is test_resume_identical's and test_loop_e2e's."""
    yield from make_loop_db("sqlite", tmp_path_factory.mktemp("loopdb"))
