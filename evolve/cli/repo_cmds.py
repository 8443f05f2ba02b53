"""`evolve repo-tasks build`: repository-level tasks from pinned sdists (see docs/repo_tasks.md)."""

from __future__ import annotations

from pathlib import Path

import typer

repo_app = typer.Typer(help="Repository-level tasks: pinned sdists with injected bugs, judged by their own tests.",
                       no_args_is_help=True)


@repo_app.command("build")
def build(packages: Path = typer.Option(Path("verifiers/repo_packages.toml"), "--packages",
                                        help="TOML list of pinned sdists."),
          out: Path = typer.Option(Path("runs/repo-tasks"), "--out", help="Folder for tasks.jsonl, report.json, cache/."),
          seed: int = typer.Option(0, "--seed", help="Orders the candidate bugs (the build is deterministic under it)."),
          per_package: int = typer.Option(6, "--per-package", help="Tasks kept per package at most."),
          max_tries: int = typer.Option(30, "--max-tries", help="Candidate bugs tried per package at most."),
          only: str = typer.Option("", "--only", help="Comma-separated package names (default: all)."),
          offline: bool = typer.Option(False, "--offline", help="Never download: the sdist cache must hold them.")) -> None:
    """Fetch (once), inject bugs, keep the verified FAIL_TO_PASS/PASS_TO_PASS ones, write tasks.jsonl."""
    from evolve.errors import ConfigError
    from evolve.repo.factory import BuildParams
    from evolve.repo.factory import build as run_build
    from evolve.repo.packages import load_packages

    specs = load_packages(packages)
    if only:
        names = {n.strip() for n in only.split(",") if n.strip()}
        unknown = names - {s.name for s in specs}
        if unknown:
            raise ConfigError(f"--only: unknown package(s) {', '.join(sorted(unknown))}")
        specs = [s for s in specs if s.name in names]

    def progress(rep) -> None:
        mean = sum(rep.verify_s) / len(rep.verify_s) if rep.verify_s else 0.0
        typer.echo(f"{rep.package:<24} {rep.split:<8} kept {rep.kept:>2} of {rep.tried:>2} tried  "
                   f"verify {mean:5.2f} s/task" + (f"  ERROR {rep.error}" if rep.error else ""))

    report = run_build(specs, out, BuildParams(seed=seed, per_package=per_package, max_tries=max_tries),
                       offline=offline, progress=progress)
    typer.echo(f"tasks={report['tasks']} file={out / 'tasks.jsonl'}")


def register(app: typer.Typer) -> None:
    app.add_typer(repo_app, name="repo-tasks")
