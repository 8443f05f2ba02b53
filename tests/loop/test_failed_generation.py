"""Errors are data: a generation that raises is marked failed with its one-line error and the
phase it died in, visible in `evolve lineage` and `evolve show`; the run stops with one line.
The fault is injected into the real policy's update (a RuntimeError, as an out-of-memory would be);
everything else is real: CI model, sandbox, database (SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

import json
import sys

from loop_helpers import CI_CONFIG


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    from evolve.cli import main

    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["evolve", *args])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_a_generation_that_raises_is_recorded_failed(loop_db, capsys, monkeypatch):
    from evolve.policy.policy import Policy

    for k, v in loop_db.env.items():
        monkeypatch.setenv(k, v)

    def broken_update(self, groups):
        raise RuntimeError("CUDA out of memory\x00 (injected)")

    monkeypatch.setattr(Policy, "update", broken_update)
    code, _out, err = run_cli(capsys, monkeypatch, "run", "--config", CI_CONFIG, "--name", "f", "--generations", "2",
                              "--db", loop_db.url)
    lines = [ln for ln in err.splitlines() if "failed in" in ln]
    assert code == 2 and "Traceback" not in err, err
    assert lines and "generation f:1 failed in update: RuntimeError: CUDA out of memory" in lines[-1], err

    code, out, _ = run_cli(capsys, monkeypatch, "lineage", "f", "--json", "--db", loop_db.url)
    gens = {g["name"]: g for g in json.loads(out)}
    assert gens["f:0"]["status"] == "committed" and gens["f:1"]["status"] == "failed"
    assert gens["f:1"]["metrics"]["failed"] == {"phase": "update",
                                                "error": "RuntimeError: CUDA out of memory\x00 (injected)"}
    assert gens["f:1"]["error"].startswith("RuntimeError: CUDA out of memory\x00 (injected)\nTraceback")

    code, out, _ = run_cli(capsys, monkeypatch, "lineage", "f", "--db", loop_db.url)
    assert "f:1  [failed]" in out and "error in update: RuntimeError: CUDA out of memory\\x00 (injected)" in out
    code, out, _ = run_cli(capsys, monkeypatch, "show", "f:1", "--db", loop_db.url)
    assert "failed" in out and "error in update: RuntimeError: CUDA out of memory\\x00 (injected)" in out
    assert "\x00" not in out  # shown escaped

    # the failed generation is kept for the record; a resume continues from the newest committed one
    monkeypatch.undo()
    for k, v in loop_db.env.items():
        monkeypatch.setenv(k, v)
    code, _out, err = run_cli(capsys, monkeypatch, "resume", "f", "--generations", "1", "--db", loop_db.url)
    assert code == 0, err
    code, out, _ = run_cli(capsys, monkeypatch, "lineage", "f", "--json", "--db", loop_db.url)
    gens = {g["name"]: g for g in json.loads(out)}
    assert gens["f:1"]["status"] == "failed" and gens["f:2"]["status"] == "committed"
    assert gens["f:2"]["parent"] == "f:0"
