"""The tiny-coder presets ship as hash-checked files, so every machine (whatever its CPU kind) runs the same
weights: `ensure_tiny_model` installs the shipped copy instead of training one, and refuses a corrupt copy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evolve.errors import EvolveError
from evolve.policy.tiny import PRESETS, BootstrapConfig, ensure_tiny_model, is_complete, model_dir
from evolve.policy.tiny.bootstrap import weights_sha256
from evolve.policy.tiny.shipped import INDEX, ROOT, install_shipped, shipped_dir

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_ships_under_its_current_build_hash(preset):
    # A preset or builder change that alters the build hash fails here until scripts/ship_tiny_models.py reruns.
    cfg = BootstrapConfig.preset(preset)
    src = shipped_dir(cfg)
    assert src is not None, f"preset {preset} ({cfg.build_hash()}) is not shipped: run scripts/ship_tiny_models.py"
    index = json.loads((src / INDEX).read_text())
    assert index["config_hash"] == cfg.build_hash() and index["preset"] == preset
    assert json.loads((src / "bootstrap.json").read_text())["config_hash"] == cfg.build_hash()


def test_ensure_installs_the_shipped_weights_byte_for_byte(tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = BootstrapConfig.preset("ci")
    path = ensure_tiny_model(cfg, runs_dir=tmp_path, progress=False)
    assert path == model_dir(cfg, tmp_path) and is_complete(path)
    assert not (path / "trained.json").exists()  # installed, not trained here (a build leaves this marker)
    src = shipped_dir(cfg)
    index = json.loads((src / INDEX).read_text())
    for name in index["sha256"]:
        assert (path / name).read_bytes() == (src / name).read_bytes(), name
    # The manifest describes these weights: its weights_sha256 was taken from the built model itself.
    manifest = json.loads((path / "bootstrap.json").read_text())
    assert weights_sha256(AutoModelForCausalLM.from_pretrained(path)) == manifest["weights_sha256"]


def test_a_corrupt_shipped_file_is_refused_by_name_and_nothing_is_installed(tmp_path):
    cfg = BootstrapConfig.preset("ci")
    root = tmp_path / "shipped"
    shutil.copytree(ROOT / cfg.build_hash(), root / cfg.build_hash())
    weights = root / cfg.build_hash() / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    dest = tmp_path / "runs" / "models" / "tiny-coder-x"
    dest.parent.mkdir(parents=True)
    with pytest.raises(EvolveError, match="model.safetensors does not match its sha256"):
        install_shipped(cfg, dest, root=root)
    assert not dest.exists()


def test_a_config_that_is_not_shipped_is_not_installed(tmp_path):
    cfg = BootstrapConfig.from_dict({"preset": "ci", "steps": 7})
    assert shipped_dir(cfg) is None and install_shipped(cfg, tmp_path / "m") is False


def test_the_shipped_default_model_is_the_one_the_committed_figures_describe():
    # benchmarks/results/bootstrap.json (held-out pass@1, per-line effects) was measured on these weights.
    shipped = json.loads((shipped_dir(BootstrapConfig.preset("default")) / "bootstrap.json").read_text())
    measured = json.loads((REPO / "benchmarks" / "results" / "bootstrap.json").read_text())
    assert shipped["weights_sha256"] == measured["results"]["weights_sha256"]
    assert shipped["figures"]["pass@1"] == measured["results"]["figures"]["pass@1"]
