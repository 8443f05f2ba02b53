"""Reproducibility helpers: seeds and versions.

One RNG mechanism: derived seeds. Every random draw the loop makes is a function of a seed
derived from (run seed, generation index, purpose) (``evolve.loop.config.GenerationSeeds``):
generation reseeds torch inside ``fork_rng``, samplers and reflectors own seeded generators,
and ``seed_everything`` is called with the generation's seed before it runs. Global RNG
states are therefore never captured or restored: a resumed or replayed generation reseeds
exactly as the original did (tested at the loop level in tests/loop/test_resume_identical.py)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import random
import subprocess
from pathlib import Path

import numpy as np

TRACKED_PACKAGES = (
    "evolve", "torch", "transformers", "tokenizers", "trl", "peft", "accelerate", "gepa",
    "litellm", "sqlalchemy", "alembic", "typer", "rich", "pydantic", "numpy",
)


def package_versions() -> dict[str, str]:
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def code_version() -> str:
    """git commit (+ '-dirty') of the checkout, else a hash of the package source."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5).stdout.strip()
        if sha:
            dirty = subprocess.run(["git", "status", "--porcelain", "--", "evolve"], cwd=root,
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    h = hashlib.sha256()
    for p in sorted((root / "evolve").rglob("*.py")):
        h.update(p.read_bytes())
    return "src-" + h.hexdigest()[:16]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:
        pass
