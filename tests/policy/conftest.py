from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory) -> Path:
    import torch

    torch.set_num_threads(1)
    from evolve.policy.randmodel import build_random_model

    return build_random_model(tmp_path_factory.mktemp("tiny") / "model")
