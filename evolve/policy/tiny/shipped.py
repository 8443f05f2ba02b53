"""The tiny-coder models shipped inside the package: built once by `evolve bootstrap`, checked by sha256.

A model trained on one CPU kind differs from the same config trained on another (float summation order),
and tests and first runs then differ with it. So the presets' models ship as files (``shipped/<hash12>/``,
a few MB): every machine runs the same weights, and a first run needs no 9-minute build.
``install_shipped`` copies a preset's folder into the runs folder after checking every file against
``SHIPPED.json``; `evolve bootstrap --force` still rebuilds from scratch, and
`scripts/ship_tiny_models.py` rewrites the shipped copies (after a change to a preset or the builder).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from evolve.errors import EvolveError
from evolve.policy.tiny.config import BootstrapConfig
from evolve.util.hashing import sha256_file

ROOT = Path(__file__).resolve().parent / "shipped"
INDEX = "SHIPPED.json"
# What a consumer loads; trained.json (the build's resume marker) stays behind.
FILES = ("bootstrap.json", "chat_template.jinja", "config.json", "generation_config.json", "model.safetensors",
         "tokenizer.json", "tokenizer_config.json")


def shipped_dir(cfg: BootstrapConfig, root: Path = ROOT) -> Path | None:
    """The shipped folder of ``cfg`` (by build hash), or None when that config is not shipped."""
    path = root / cfg.build_hash()
    return path if (path / INDEX).is_file() else None


def install_shipped(cfg: BootstrapConfig, dest: Path, root: Path = ROOT) -> bool:
    """Copy ``cfg``'s shipped model into ``dest`` (absent or complete: copied under a temp name, then renamed).
    False when ``cfg`` is not shipped; a file that fails its sha256 is an error naming it, nothing installed."""
    src = shipped_dir(cfg, root)
    if src is None:
        return False
    index = json.loads((src / INDEX).read_text())
    for name, want in index["sha256"].items():
        if not (src / name).is_file() or sha256_file(src / name) != want:
            raise EvolveError(f"shipped model {src.name}: {name} does not match its sha256 in {INDEX} "
                              "(rebuild it with `evolve bootstrap --force`)")
    partial = dest.parent / f".{dest.name}.shipped-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in index["sha256"]:
        shutil.copyfile(src / name, partial / name)
    shutil.rmtree(dest, ignore_errors=True)  # an incomplete folder (the caller holds the build lock)
    os.replace(partial, dest)
    return True
