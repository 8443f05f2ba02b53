"""Rewrite the tiny-coder models shipped in the package (evolve/policy/tiny/shipped/), after a change to a
preset or to the builder: `python scripts/ship_tiny_models.py RUNS_DIR [preset ...]` (default: every preset).
A preset already built under RUNS_DIR/models is copied as it is; otherwise it is built there first
(the default preset: about 9 minutes on 2 cores). Delete the old hash's folder by hand."""

import json
import shutil
import sys
from pathlib import Path

from evolve.policy.tiny.bootstrap import build, is_complete, model_dir
from evolve.policy.tiny.config import PRESETS, BootstrapConfig
from evolve.policy.tiny.shipped import FILES, INDEX, ROOT
from evolve.util.cpu import cpu_kind
from evolve.util.hashing import sha256_file


def ship(preset: str, runs_dir: Path, root: Path = ROOT) -> Path:
    """Copy ``preset``'s model as built under ``runs_dir`` (built from scratch there first if it is not) with
    its sha256 index under ``root``."""
    cfg = BootstrapConfig.preset(preset)
    built = model_dir(cfg, runs_dir)
    if not is_complete(built):
        build(cfg, built, progress=True)
    out = root / cfg.build_hash()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(built / name, out / name)
    index = {"preset": preset, "config_hash": cfg.build_hash(), "built_on": cpu_kind(),
             "sha256": {name: sha256_file(out / name) for name in FILES}}
    (out / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: ship_tiny_models.py RUNS_DIR [preset ...]")
    for name in sys.argv[2:] or sorted(PRESETS):
        print(f"shipped {name}: {ship(name, Path(sys.argv[1]))}")
