"""`evolve bootstrap`: build (or reuse) the tiny-coder base model and report its targets."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer


def bootstrap(
    preset: str = typer.Option("default", "--preset", help="Bootstrap preset: default | ci."),
    config: Path | None = typer.Option(None, "--config", help="TOML with a \\[bootstrap] table (overrides)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if this config is cached."),
    as_json: bool = typer.Option(False, "--json", help="Print bootstrap.json (plus targets) as JSON."),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Runs folder (default $EVOLVE_RUNS_DIR or ./runs)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when a target is missed."),
) -> int:
    """Build the default tiny-coder model (tokenizer, Qwen2, teacher SFT) and measure it on held-out tasks."""
    from evolve.policy.tiny import BootstrapConfig, ensure_tiny_model, read_manifest
    from evolve.policy.tiny.targets import check_targets

    cfg = BootstrapConfig.from_toml(config) if config else BootstrapConfig.preset(preset)
    t0 = time.perf_counter()
    path = ensure_tiny_model(cfg, runs_dir=runs_dir, progress=not as_json, force=force)
    elapsed = time.perf_counter() - t0
    manifest = read_manifest(path)
    rows = check_targets(manifest)
    cached = elapsed < 0.5 * manifest["timings"]["total_s"]
    if as_json:
        typer.echo(json.dumps({"path": str(path), "cached": cached, "elapsed_s": round(elapsed, 2),
                               "targets": rows, **manifest}, indent=2, sort_keys=True))
    else:
        _print_report(path, manifest, rows, cached, elapsed)
    missed = any(r["ok"] is False for r in rows)
    return 1 if strict and missed else 0


def _fmt(v) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _print_report(path: Path, manifest: dict, rows: list[dict], cached: bool, elapsed: float) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    fig = manifest.get("figures") or {}
    console.print(f"model: {path}  ({manifest['n_params']:,} params, vocab {manifest['vocab']}, "
                  f"{'cached' if cached else 'built'} in {elapsed:.1f} s)")
    if fig:
        console.print(f"measured on {fig['eval_tasks']} held-out tasks with {fig['verifier']}")
    table = Table(title="tiny-coder bootstrap targets")
    for col in ("figure", "value", "target", "status"):
        table.add_column(col, no_wrap=True)
    table.add_column("detail")
    for r in rows:
        status = "" if r["ok"] is None else ("[green]PASS[/]" if r["ok"] else "[red]MISS[/]")
        detail = (f"\"{r['line']}\" " if r.get("line") else "") + r.get("detail", "")
        table.add_row(r["name"], _fmt(r["value"]), r["target"], status, detail)
    console.print(table)
    lines = [f"model_dir={path}", f"cached={int(cached)}", f"params={manifest['n_params']}"]
    lines += [f"{k}={v}" for k, v in manifest["timings"].items()]
    lines += [f"{r['name'].replace(' ', '_')}={_fmt(r['value'])}" for r in rows]
    lines.append(f"weights_sha256={manifest['weights_sha256']}")
    typer.echo("\n".join(lines))


def register(app: typer.Typer) -> None:
    app.command("bootstrap")(bootstrap)
