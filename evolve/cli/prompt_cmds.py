"""``evolve prompts RUN``: the prompt DAG of a run with scores (read-only)."""

from __future__ import annotations

import json
import sys

import typer

DB_HELP = "Database: a SQLAlchemy URL or a SQLite file path (default $EVOLVE_DB, else runs/lineage.db)."


def prompts(run: str = typer.Argument(..., help="Run name."),
            db: str | None = typer.Option(None, "--db", help=DB_HELP),
            as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON output.")) -> None:
    """The prompt versions a run used and their ancestors, as a tree with scores."""
    from evolve.lineage import LineageStore
    from evolve.prompt.dag import prompt_dag, render_tree

    with LineageStore.open(db, create=False, auto_upgrade=False) as store:
        nodes = prompt_dag(store, run)
    if as_json:
        sys.stdout.write(json.dumps(nodes, indent=2, ensure_ascii=False) + "\n")
        return
    from rich.console import Console

    Console(highlight=False).print(render_tree(run, nodes))


def register(app: typer.Typer) -> None:
    app.command("prompts")(prompts)
