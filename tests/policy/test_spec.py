from __future__ import annotations

from pathlib import Path

import pytest

from evolve.errors import ConfigError, EvolveError
from evolve.policy import PolicySpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["tiny-coder", "tiny-coder-ci", "qwen2.5-coder-1.5b-lora-vllm", "api-litellm"])
def test_shipped_specs_validate(name):
    spec = PolicySpec.from_toml(ROOT / "policies" / f"{name}.toml")
    assert spec.name == name
    assert spec.can_update == (spec.backend != "litellm")


def test_shipped_spec_values():
    ci = PolicySpec.from_toml(ROOT / "policies" / "tiny-coder-ci.toml")
    assert ci.bootstrap == {"preset": "ci"}
    gpu = PolicySpec.from_toml(ROOT / "policies" / "qwen2.5-coder-1.5b-lora-vllm.toml")
    assert gpu.finetune == "lora" and gpu.backend == "vllm" and gpu.lora.r == 16
    assert (gpu.grpo.epsilon_low, gpu.grpo.epsilon_high) == (0.16, 0.24)


def test_spec_is_frozen():
    spec = PolicySpec()
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        spec.model = "x"  # type: ignore[misc]


@pytest.mark.parametrize("body,needle", [
    ("model = ", "invalid TOML"),
    ("mdoel = 'x'", "mdoel"),
    ("[sampling]\ntemperature = -1", "sampling.temperature"),
    ("[grpo]\nadvantage = 'ppo'", "grpo.advantage"),
    ("[grpo]\nloss_type = 'sum'", "grpo.loss_type"),
    ("finetune = 'qlora'", "finetune"),
    ("backend = 'litellm'", "litellm.model"),
    ("[optimizer]\nlr = 'fast'", "optimizer.lr"),
    ("[lora]\nr = 0", "lora.r"),
    ("threads = 0", "threads"),
    ("[sampling]\ntop_p = 0.9\nbogus = 1", "sampling.bogus"),
    ("[sampling]\nn = 4", "sampling.n is gone: G (samples per task) is the loop's samples_per_task"),  # one knob
])
def test_malformed_spec_is_one_line_config_error(tmp_path, body, needle):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as e:
        PolicySpec.from_toml(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and needle in msg


def test_a_recorded_spec_with_sampling_n_loads_without_it():
    """Runs and checkpoints recorded while sampling.n existed resume: the loop never read it."""
    recorded = {**PolicySpec().model_dump(mode="json"), "sampling": {"n": 8, "temperature": 0.5}}
    spec = PolicySpec.from_recorded(recorded)
    assert spec.sampling.temperature == 0.5 and "n" not in spec.sampling.model_dump()
    with pytest.raises(ConfigError, match="sampling.n is gone"):
        PolicySpec.from_dict(recorded)


def test_missing_spec_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        PolicySpec.from_toml(tmp_path / "nope.toml")


def test_vllm_without_the_gpu_extra_is_a_clear_error(tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    from evolve.policy import load_policy

    spec = PolicySpec.from_toml(ROOT / "policies" / "qwen2.5-coder-1.5b-lora-vllm.toml")
    with pytest.raises(EvolveError, match=r"vllm backend needs vLLM.*scripts/setup.sh --vllm.*constraints/gpu.txt"):
        load_policy(spec)


def test_unknown_hub_model_offline_is_a_clear_error(monkeypatch):
    from evolve.policy import load_policy

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = PolicySpec(model="no-such-org/no-such-model-xyz")
    with pytest.raises(EvolveError, match="cannot load"):
        load_policy(spec)


def test_missing_local_model_folder(tmp_path):
    from evolve.policy import load_policy

    with pytest.raises(ConfigError, match="does not exist"):
        load_policy(PolicySpec(model=str(tmp_path / "missing")))
