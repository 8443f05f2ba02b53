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


def _channel():
    """The writer of this run's rows. The nonce and the file live in its closure, not in module
    globals: ``sys.modules["evolve_repo_plugin"]._NONCE`` was how code under test forged rows; a
    closure is reached only through a dunder (``__closure__``) or gc, which editcheck.py refuses."""
    nonce = os.environ.pop("EVOLVE_REPO_NONCE", "")
    out = os.environ.pop("EVOLVE_REPO_OUT", "")
    fh = open(out, "a", encoding="utf-8") if out else None  # noqa: SIM115 (kept open for the session)

    def emit(kind: str, payload: dict) -> None:
        if fh is not None:
            fh.write(f"{nonce} {kind} {json.dumps(payload)}\n")
            fh.flush()

    return emit


_emit = _channel()


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
