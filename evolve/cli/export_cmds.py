"""`evolve export jsonl|mlflow RUN`: a run's lineage for other tools (read-only on the lineage)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from evolve.cli.lineage_cmds import DB_HELP, _open

export_app = typer.Typer(help="Export a run: JSON Lines (everything) or MLflow (metrics per step, prompt versions).",
                         no_args_is_help=True)


@export_app.command("jsonl")
def jsonl(run: str = typer.Argument(..., help="Run name."),
          db: str | None = typer.Option(None, "--db", help=DB_HELP),
          out: Path | None = typer.Option(None, "--out", "-o", help="File to write (default: standard output)."),
          rollouts: bool = typer.Option(True, "--rollouts/--no-rollouts", help="Include every rollout.")) -> None:
    """One JSON object per line: the run, generations, prompt and weights versions, LM calls, rollouts."""
    from evolve.lineage.export import write_jsonl
    from evolve.lineage.pages import run_row

    with _open(db) as store:
        run_row(store, run)  # an unknown run fails before any file is touched
        if out is None:
            counts = write_jsonl(store, run, sys.stdout, rollouts=rollouts)
        else:
            tmp = out.with_name(out.name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                counts = write_jsonl(store, run, f, rollouts=rollouts)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out)
    typer.echo("exported " + ", ".join(f"{n} {k}" for k, n in counts.items()), err=True)


@export_app.command("mlflow")
def mlflow(run: str = typer.Argument(..., help="Run name."),
           db: str | None = typer.Option(None, "--db", help=DB_HELP),
           tracking_uri: str | None = typer.Option(
               None, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
               help="MLflow tracking URI (default sqlite:///<runs dir>/mlflow.db; file:///DIR works too)."),
           experiment: str = typer.Option("evolve", "--experiment", help="MLflow experiment name.")) -> None:
    """Log each committed generation as an MLflow step and the prompt versions as MLflow prompt versions."""
    from evolve.lineage.export import export_mlflow
    from evolve.lineage.pages import run_row

    with _open(db) as store:
        run_row(store, run)
        uri = tracking_uri or f"sqlite:///{(store.runs_dir / 'mlflow.db').resolve()}"
        info = export_mlflow(store, run, uri, experiment=experiment, say=lambda m: typer.echo(m, err=True))
    typer.echo(f"mlflow: run {info['run_id']} in experiment {experiment!r} ({info['steps']} steps, "
               f"{info['prompt_versions']} prompt versions) at {info['tracking_uri']}")


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
