"""Usage errors of the real `evolve` CLI (an unknown option or command, an option in the wrong
place, a bad value) are one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args,needle", [
    (["run", "--bogus"], "--bogus: not an option of this command"),
    (["--db", "sqlite:///x.db", "run"], "No such option: --db"),
    (["nosuchcmd"], "No such command 'nosuchcmd'"),
    (["run", "--generations", "many"], "Invalid value for '--generations'"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, needle):
    proc = subprocess.run([sys.executable, "-m", "evolve", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and needle in lines[0] and "Traceback" not in proc.stderr


def _register_problems(path: Path) -> list[str]:
    """What in ``register(app)`` is not a plain ``app.command("name")(fn)`` / ``app.add_typer(...)`` of a
    module-level name: a command defined (or decorated) inside ``register`` is one of these."""
    import ast

    tree = ast.parse(path.read_text())
    (reg,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "register"]
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    top |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    top |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    bad = []
    for stmt in reg.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        listed = isinstance(call, ast.Call) and (
            (isinstance(call.func, ast.Call) and isinstance(call.func.func, ast.Attribute)
             and call.func.func.attr == "command" and len(call.func.args) == 1
             and isinstance(call.func.args[0], ast.Constant) and len(call.args) == 1
             and isinstance(call.args[0], ast.Name) and call.args[0].id in top)
            or (isinstance(call.func, ast.Attribute) and call.func.attr == "add_typer"
                and bool(call.args) and isinstance(call.args[0], ast.Name) and call.args[0].id in top))
        if not listed:
            bad.append(f"{path.name}:{stmt.lineno}")
    return bad


def test_every_area_registers_its_commands_one_way():
    """One CLI style: commands are module-level functions, register(app) only lists them by name."""
    from evolve.cli import _AREAS

    cli = Path(__file__).resolve().parents[1] / "evolve" / "cli"
    areas = {f"{a}.py" for a in _AREAS}
    assert areas == {p.name for p in cli.glob("*_cmds.py")}  # every area module is registered
    problems = [p for a in sorted(areas) for p in _register_problems(cli / a)]
    assert problems == []


def test_the_style_check_catches_a_command_defined_inside_register(tmp_path):
    """The shape loop_cmds.py had: a decorated command inside register(), a nameless app.command()(fn),
    and a listed name that is not the module's."""
    src = tmp_path / "nested_cmds.py"
    src.write_text("import typer\n\n\ndef ok() -> None:\n    pass\n\n\n"
                   "def register(app: typer.Typer) -> None:\n"
                   "    app.command(\"ok\")(ok)\n"
                   "    @app.command()\n    def run() -> None:\n        pass\n"
                   "    app.command()(ok)\n"
                   "    app.command(\"x\")(elsewhere)\n")
    assert _register_problems(src) == ["nested_cmds.py:11", "nested_cmds.py:13", "nested_cmds.py:14"]


def test_help_texts_keep_their_bracketed_table_names():
    """Help is rendered with rich markup, which takes a lowercase ``[loop]`` for a style and drops it
    ("Loop config TOML ( table)"); every bracketed name in a command's or option's help must survive."""
    import re

    import click
    import typer.main

    from evolve.cli import app

    root = typer.main.get_command(app)
    bracketed = re.compile(r"(?<!\\)\\?\[([a-z][a-z._-]*)\]")
    checked = 0

    def walk(cmd: click.Command, path: list[str]) -> None:
        nonlocal checked
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        wanted = {f"[{m}]" for t in texts for m in bracketed.findall(t)}
        if wanted:
            out = subprocess.run([sys.executable, "-m", "evolve", *path, "--help"], cwd=REPO, capture_output=True,
                                 text=True, timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}).stdout
            missing = sorted(w for w in wanted if w not in out)
            assert not missing, f"evolve {' '.join(path)} --help lost {missing}"
            checked += len(wanted)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(root, [])
    assert checked >= 4  # run's, plan's and bootstrap's [loop]/[cluster]/[bootstrap] at least
