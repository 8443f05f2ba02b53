"""`evolve ui`: browse the lineage in a web browser (read-only, 127.0.0.1 by default)."""

from __future__ import annotations

import typer

from evolve.cli.lineage_cmds import DB_HELP


def ui(db: str | None = typer.Option(None, "--db", help=DB_HELP),
       host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; a non-loopback one needs --token."),
       port: int = typer.Option(8765, "--port", help="TCP port."),
       token: str | None = typer.Option(None, "--token", envvar="EVOLVE_UI_TOKEN",
                                        help="Require this token on every request (needed off loopback).")) -> None:
    """Serve a read-only web view of runs, generations, prompts, reflection calls and rollouts."""
    from evolve.ui import serve

    serve(db, host=host, port=port, token=token, say=typer.echo)


def register(app: typer.Typer) -> None:
    app.command("ui")(ui)
