"""Issue #24: the live status line of `evolve run` shows a proposed lesson (model text) as one escaped
line: no newline, carriage return, terminal escape or rich markup from it reaches the terminal."""

from __future__ import annotations

import io
from types import SimpleNamespace

FORGED = "999 passed"
ADDED = f"[bold red]x[/]\n{FORGED}\r{FORGED}\x1b[2K{FORGED}"


def _metrics(selection: str) -> dict:
    base = {"heldout": {"pass@1": 0.5}, "levers": {"weights": True, "prompt": True}, "timings": {"total": 1.0}}
    if selection == "in_group":
        return {**base, "selection": "in_group", "accepted": 0, "pool": [], "challengers": [
            {"id": "9c9659e6ff", "added": ADDED, "n": 8, "mean_diff": 0.0, "lower": -0.1, "upper": 0.1,
             "decision": "active"}]}
    return {**base, "selection": "gate", "accepted": 0, "proposals": 1, "gate": [
        {"id": "abcdef12", "kind": "add-lesson", "added": ADDED, "minibatch": [0.25, 0.5], "val": [None, None],
         "accepted": False, "skipped": None}]}


def test_a_proposed_lesson_cannot_forge_or_style_a_status_line():
    from rich.console import Console

    from evolve.cli.loop_cmds import StatusPrinter

    for selection in ("in_group", "gate"):
        printer = StatusPrinter(3)
        buf = io.StringIO()
        printer.console = Console(file=buf, width=60, force_terminal=True, color_system=None)
        # the lesson lines an admitted proposal adds are shown too (what reflection just wrote)
        proposal = SimpleNamespace(candidate=SimpleNamespace(components={"lessons": ADDED}))
        printer(1, "done", SimpleNamespace(metrics=_metrics(selection), prompt=SimpleNamespace(components={}),
                                           proposals=[{"accepted": True, "proposal": proposal}]))
        out = buf.getvalue()
        assert out.count("\n") == 1 and "\r" not in out and "\x1b" not in out, repr(out)
        assert "+'[bold red]x[/]\\n999 passed\\r999 passe...'" in out, repr(out)  # markup shown, not applied
