"""docs/configuration.md's field reference is generated from the config models (scripts/config_reference.py):
a field added, removed or redescribed without rerunning the script fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_field_reference_is_current(monkeypatch):
    monkeypatch.chdir(REPO)  # the defaults column reads the embedded default's policy spec
    spec = importlib.util.spec_from_file_location("config_reference", REPO / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = (REPO / "docs" / "configuration.md").read_text()
    assert module.MARK in doc, "run scripts/config_reference.py"
    assert doc.split(module.MARK)[1] == module.reference().split(module.MARK)[1], \
        "docs/configuration.md's field reference is stale: run python scripts/config_reference.py"
