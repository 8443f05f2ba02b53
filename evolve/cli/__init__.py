"""The `evolve` command line.

Each area registers its commands from its own module, so the parts stay apart. One style: commands
are module-level functions (or a ``typer.Typer`` group) and ``register(app)`` only lists them,
``app.command("name")(fn)`` / ``app.add_typer(group, name="...")`` (tests/test_cli_usage.py checks it).
Heavy libraries (torch, litellm) are imported inside commands, never here.
"""

from __future__ import annotations

import os

import click
import typer

from evolve.errors import EvolveError

# Offline by construction: no hub, no telemetry, no cost-map fetch at import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Our own rich progress bars report progress; the libraries' tqdm bars and advisories are noise here.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

app = typer.Typer(
    name="evolve",
    help="Self-evolution loop for code models: weights (GRPO) + prompt (GEPA) on the same verified rollouts.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_AREAS = ("lineage_cmds", "verify_cmds", "bootstrap_cmds", "policy_cmds", "prompt_cmds", "loop_cmds",
          "serve_cmds", "ui_cmds", "export_cmds", "repo_cmds")


def _register_all() -> None:
    import importlib

    for area in _AREAS:
        importlib.import_module(f"evolve.cli.{area}").register(app)


_register_all()


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error and exit (no traceback)."""
    first = " ".join(str(message).split())
    typer.echo(f"error: {first}", err=True)
    raise SystemExit(code)


def main() -> None:
    try:
        rv = app(standalone_mode=False)
    except EvolveError as e:
        fail(str(e), e.exit_code)
    except (click.exceptions.Abort, typer.Abort):
        fail("aborted", 130)
    except (click.ClickException, typer.TyperException) as e:
        # typer >= 0.29 raises its own copy of click's exceptions (typer._click), not click's: both
        # are usage errors (unknown option or command, bad value), told in one line.
        fail(e.format_message() if hasattr(e, "format_message") else str(e), getattr(e, "exit_code", 2))
    except KeyboardInterrupt:
        fail("interrupted", 130)
    if isinstance(rv, int) and rv:
        raise SystemExit(rv)
