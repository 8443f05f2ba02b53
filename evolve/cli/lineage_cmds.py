"""Inspection commands: runs, lineage, show, diff, check, db upgrade/current.

Inspection commands open the database read-only (``create=False, auto_upgrade=False``):
bad input is a one-line error, exit 2, and nothing is written. Every one takes ``--json``.
SQLAlchemy and Rich are imported inside the commands, so `evolve --help` stays fast.
"""

from __future__ import annotations

import json
import sys

import typer

from evolve.errors import LineageError

DB_HELP = "Database: a SQLAlchemy URL or a SQLite file path (default $EVOLVE_DB, else runs/lineage.db)."
JSON_HELP = "Machine-readable JSON output."


def _open(db: str | None):
    from evolve.lineage import LineageStore

    return LineageStore.open(db, create=False, auto_upgrade=False)


def _emit_json(obj) -> None:
    """Indented JSON; a long list gets one compact item per line (json's C encoder skips indent)."""
    if isinstance(obj, list) and len(obj) > 200:
        items = ",\n".join(json.dumps(x, default=str, ensure_ascii=False) for x in obj)
        sys.stdout.write("[\n" + items + "\n]\n")
    else:
        sys.stdout.write(json.dumps(obj, indent=2, default=str, ensure_ascii=False) + "\n")


def _console():
    from rich.console import Console

    return Console(highlight=False)


def runs(db: str | None = typer.Option(None, "--db", help=DB_HELP),
         as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """List runs with their generation counts."""
    with _open(db) as store:
        rows = store.list_runs()
    if as_json:
        return _emit_json(rows)
    from rich.table import Table

    t = Table("run", "created", "generations", "committed", "pending", "failed", "latest", "code", "sandbox")
    for r in rows:
        t.add_row(r["name"], (r["created_at"] or "")[:19], str(r["generations"]), str(r["committed"]),
                  str(r["pending"]), str(r["failed"]), "-" if r["latest_committed"] is None
                  else f"{r['name']}:{r['latest_committed']}", (r["code_version"] or "")[:12],
                  r.get("verifier_isolation", "unrecorded"))
    _console().print(t if rows else "no runs")


def lineage(run: str = typer.Argument(..., help="Run name."),
            db: str | None = typer.Option(None, "--db", help=DB_HELP),
            as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
            metric: list[str] = typer.Option([], "--metric", "-m", help="Metric to show (repeatable)."),
            committed: bool = typer.Option(False, "--committed", help="Only committed generations.")) -> None:
    """The tree of generations: prompt and weights versions, key metrics, branch points."""
    from evolve.lineage.render import lineage_lines, pick_metrics, summary_line

    with _open(db) as store:
        gens = store.lineage(run)
    if committed:
        gens = [g for g in gens if g["status"] == "committed"]
    if as_json:
        return _emit_json(gens)
    lines = [summary_line(run, gens), "('*' = version changed from the parent generation)"]
    lines += lineage_lines(gens, metric or pick_metrics(gens))
    sys.stdout.write("\n".join(lines) + "\n")


def show(ref: str = typer.Argument(..., help="RUN:INDEX, a generation id, or a prompt/weights version hash prefix."),
         db: str | None = typer.Option(None, "--db", help=DB_HELP),
         as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """A generation (prompt text, weights, metrics, parent) or a prompt/weights version."""
    from evolve.lineage import showing

    with _open(db) as store:
        kind, info = showing.resolve_and_describe(store, ref)
    if as_json:
        return _emit_json({"kind": kind, **info})
    showing.print_human(_console(), kind, info)


def diff(gen_a: str = typer.Argument(..., help="RUN:INDEX or id."),
         gen_b: str = typer.Argument(..., help="RUN:INDEX or id."),
         db: str | None = typer.Option(None, "--db", help=DB_HELP),
         as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Unified diff of the prompt components, metric deltas, and how the weights relate."""
    from evolve.lineage import showing
    from evolve.lineage.diff import diff_generations

    with _open(db) as store:
        d = diff_generations(store, store.resolve_generation(gen_a), store.resolve_generation(gen_b))
    if as_json:
        return _emit_json(d)
    showing.print_diff(_console(), d)


def check(run: str | None = typer.Argument(None, help="Run name (default: every run)."),
          db: str | None = typer.Option(None, "--db", help=DB_HELP),
          as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Verify artifact hashes, parent links and committed-generation invariants; exit 1 on a violation."""
    from evolve.lineage.check import check as run_check

    with _open(db) as store:
        rep = run_check(store, run)
    if as_json:
        _emit_json(rep.to_dict())
    else:
        for v in rep.violations:
            typer.echo(f"violation: {v}")
        typer.echo(f"{'FAILED' if rep.violations else 'ok'}: {rep.generations} generations "
                   f"({rep.committed} committed, {rep.pending} pending), {rep.prompt_versions} prompt versions, "
                   f"{rep.weights_versions} weights versions, {rep.artifacts} artifacts verified"
                   + (f", {len(rep.violations)} violations" if rep.violations else ""))
    if rep.violations:
        raise typer.Exit(1)


db_app = typer.Typer(help="Lineage database schema.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(db: str | None = typer.Option(None, "--db", help=DB_HELP),
               create: bool = typer.Option(False, "--create", help="Create the database if it does not exist.")
               ) -> None:
    """Migrate the database schema to this evolve's head."""
    from evolve.lineage import db as dbmod
    from evolve.lineage.models import SCHEMA_HEAD
    from evolve.lineage.store import LineageStore

    target = dbmod.resolve_url(db)
    if target.sqlite_path is not None and not target.sqlite_path.exists() and not create:
        raise LineageError(f"no lineage database at {target.sqlite_path} (pass --create to make one)")
    engine = dbmod.make_engine(target)
    try:
        before = dbmod.current_revision(engine, target) if target.sqlite_path is None \
            or target.sqlite_path.exists() else None
        dbmod.check_revision(before, target, auto_upgrade=True)
    finally:
        engine.dispose()
    LineageStore.open(db, create=True, auto_upgrade=True).close()
    if before == SCHEMA_HEAD:
        typer.echo(f"{target.label}: already at head {SCHEMA_HEAD}")
    else:
        typer.echo(f"{target.label}: upgraded {before or '(empty)'} -> {SCHEMA_HEAD}")


@db_app.command("current")
def db_current(db: str | None = typer.Option(None, "--db", help=DB_HELP),
               as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Print the database's schema revision and this evolve's head."""
    from evolve.lineage import db as dbmod
    from evolve.lineage.models import SCHEMA_HEAD

    target = dbmod.resolve_url(db)
    if target.sqlite_path is not None and not target.sqlite_path.exists():
        raise LineageError(f"no lineage database at {target.sqlite_path}")
    engine = dbmod.make_engine(target)
    try:
        rev = dbmod.current_revision(engine, target)
    finally:
        engine.dispose()
    if as_json:
        return _emit_json({"database": target.label, "revision": rev, "head": SCHEMA_HEAD})
    typer.echo(f"{target.label}: schema {rev or '(empty)'}, head {SCHEMA_HEAD}")


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
    app.command("lineage")(lineage)
    app.command("show")(show)
    app.command("diff")(diff)
    app.command("check")(check)
    app.add_typer(db_app, name="db")
