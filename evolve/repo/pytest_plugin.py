"""The results channel of a sandboxed pytest run (loaded with ``-p evolve_repo_plugin``).

It runs INSIDE the sandbox, next to the code under test, so it trusts nothing there: the nonce it
stamps on every line is taken out of the environment when the plugin loads (before any test module,
and so any package code, is imported), and the run only counts when the closing ``END`` line with
that nonce arrives (a run killed by ``os._exit`` at import, or ended early, never writes it).
Only the ``call`` phase's outcome counts as passed; a skip or xfail is reported as such.
This file imports nothing from evolve: it is copied into the sandbox's read-only runner folder.
"""

from __future__ import annotations

import json
import os

_NONCE = os.environ.pop("EVOLVE_REPO_NONCE", "")
_OUT = os.environ.pop("EVOLVE_REPO_OUT", "")
_FH = open(_OUT, "a", encoding="utf-8") if _OUT else None  # noqa: SIM115 (kept open for the session)


def _emit(kind: str, payload: dict) -> None:
    if _FH is not None:
        _FH.write(f"{_NONCE} {kind} {json.dumps(payload)}\n")
        _FH.flush()


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        text = "" if report.outcome == "passed" else str(report.longrepr)[-1500:]
        _emit("R", {"id": report.nodeid, "when": report.when, "outcome": outcome, "text": text})


def pytest_collectreport(report):
    if report.outcome != "passed":
        _emit("C", {"id": report.nodeid, "text": str(report.longrepr)[-1500:]})


def pytest_unconfigure(config):
    _emit("END", {})
