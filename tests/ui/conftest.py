"""Fixtures for the UI tests: a lineage made by a short real run (plus a fork and a hostile run),
the real `evolve ui` server on 127.0.0.1, and Debian's headless chromium driven by Playwright."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_helpers import CHROMIUM, CHROMIUM_FLAGS, REPO, add_hostile_run, evolve, start_ui


@pytest.fixture(scope="session")
def ui_db(tmp_path_factory, tiny_model_dir) -> Path:
    """A short real coupled run `t` (generations 0..2), a fork `t:3` from `t:1`, and the hostile run."""
    db = tmp_path_factory.mktemp("ui") / "lineage.db"
    evolve("run", "--config", str(REPO / "configs" / "ci.toml"), "--name", "t", "--generations", "2", db=db)
    evolve("resume", "t", "--from", "t:1", "--generations", "1", db=db)
    add_hostile_run(db)
    return db


@pytest.fixture(scope="session")
def ui_server(ui_db):
    proc, base = start_ui(ui_db)
    yield base
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (scripts/setup.sh installs Debian's chromium when root)")
    playwright = pytest.importorskip("playwright.sync_api")
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data-dir
    with playwright.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 900})
        yield ctx
        ctx.close()


@pytest.fixture
def page(browser_context):
    """A fresh tab that fails the test on any uncaught script error or console error."""
    pg = browser_context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.errors = errors
    yield pg
    pg.close()
