"""Reproducibility helpers: seeds, RNG state capture/restore, versions."""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import pickle
import random
import subprocess
from pathlib import Path

import numpy as np

TRACKED_PACKAGES = (
    "evolve", "torch", "transformers", "tokenizers", "trl", "peft", "accelerate", "dspy", "gepa",
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


def capture_rng_state() -> bytes:
    """Python, numpy and torch global RNG states as one pickled blob."""
    state = {"python": random.getstate(), "numpy": np.random.get_state()}
    try:
        import torch

        state["torch"] = torch.get_rng_state().numpy().tobytes()
    except ImportError:
        pass
    buf = io.BytesIO()
    pickle.dump(state, buf, protocol=4)
    return buf.getvalue()


def restore_rng_state(blob: bytes) -> None:
    state = pickle.loads(blob)
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "torch" in state:
        import torch

        torch.set_rng_state(torch.frombuffer(bytearray(state["torch"]), dtype=torch.uint8))
