"""Runs of a batch that outlives its machine: kept in the repository, restored on the next one.

An ablation on a real model runs for hours over several sessions, and ``runs/`` (git-ignored) does not
survive a session's machine. ``keep`` copies each run of a batch folder into a kept folder
(``benchmarks/results/lineage/<batch>/``): its record (``NAME.json``, finished runs only), its lineage
database as a consistent snapshot (SQLite's backup API, so a run writing at that moment, WAL and all,
is copied as of its last commit), gzipped, and for an unfinished run its artifacts (the committed
generations' LoRA checkpoints and optimizer state), without which it could not resume. ``restore``
puts back whatever the batch folder lacks; the batch's own resume (each run from its newest committed
generation) does the rest.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import tarfile
import tempfile
from pathlib import Path

ARTIFACTS = ".artifacts.tar.gz"


def _snapshot(db: Path, dest_gz: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / db.name
        src, dst = sqlite3.connect(f"file:{db}?mode=ro", uri=True), sqlite3.connect(copy)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        part = dest_gz.with_name(dest_gz.name + ".part")
        with open(copy, "rb") as f, gzip.GzipFile(part, "wb", mtime=0) as g:
            shutil.copyfileobj(f, g)
        part.replace(dest_gz)


def keep(out: Path, kept: Path) -> list[str]:
    """Every run under ``out`` into ``kept``; the names of the runs kept."""
    kept.mkdir(parents=True, exist_ok=True)
    names = []
    for db in sorted(out.glob("*-s*.db")):
        name = db.stem
        finished = (out / f"{name}.json").exists()
        _snapshot(db, kept / f"{name}.db.gz")
        if finished:
            shutil.copyfile(out / f"{name}.json", kept / f"{name}.json")
            (kept / f"{name}{ARTIFACTS}").unlink(missing_ok=True)  # a finished run never resumes
        elif (out / name / "artifacts").is_dir():
            part = kept / f"{name}{ARTIFACTS}.part"
            with tarfile.open(part, "w:gz") as tar:
                tar.add(out / name / "artifacts", arcname="artifacts")
            part.replace(kept / f"{name}{ARTIFACTS}")
        names.append(name)
    if (out / "batches.json").exists():
        shutil.copyfile(out / "batches.json", kept / "batches.json")
    return names


def restore(kept: Path, out: Path) -> list[str]:
    """What ``out`` lacks of ``kept``'s runs, put back; the names restored. A run ``out`` already has
    (this machine's own, perhaps newer) is left alone."""
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for gz in sorted(kept.glob("*-s*.db.gz")):
        name = gz.name.removesuffix(".db.gz")
        if (out / f"{name}.db").exists() or (out / f"{name}.json").exists():
            continue
        with gzip.open(gz, "rb") as g, open(out / f"{name}.db.part", "wb") as f:
            shutil.copyfileobj(g, f)
        (out / f"{name}.db.part").replace(out / f"{name}.db")
        if (kept / f"{name}.json").exists():
            shutil.copyfile(kept / f"{name}.json", out / f"{name}.json")
        elif (kept / f"{name}{ARTIFACTS}").exists():
            with tarfile.open(kept / f"{name}{ARTIFACTS}") as tar:
                tar.extractall(out / name, filter="data")
        names.append(name)
    if (kept / "batches.json").exists() and not (out / "batches.json").exists():
        shutil.copyfile(kept / "batches.json", out / "batches.json")
    return names
