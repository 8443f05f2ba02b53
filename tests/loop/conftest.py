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
