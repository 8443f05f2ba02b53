"""A policy or config file that extends another states only its differences; a policy from a model
path plus a spec's settings (``--model``) needs no copied file."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.cluster import ClusterConfig
from evolve.errors import ConfigError
from evolve.loop.config import LoopConfig
from evolve.policy import PolicySpec
from evolve.util.toml_files import merge

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "policies"


def _dump(spec: PolicySpec) -> dict:
    d = spec.model_dump(mode="json")
    d.pop("name")
    return d


def test_the_shipped_variants_are_their_base_plus_one_difference():
    ablation, instruct = (PolicySpec.from_toml(POLICIES / f"smollm2-135m-{n}.toml") for n in ("ablation", "instruct"))
    assert ablation.name == "smollm2-135m-ablation" and ablation.optimizer.lr == 1e-4 and instruct.optimizer.lr == 2e-5
    assert _dump(ablation) == _dump(instruct.model_copy(update={"optimizer": ablation.optimizer}))
    assert ablation.lora == instruct.lora and ablation.sampling == instruct.sampling and ablation.lora.r == 16
    task, ci = (PolicySpec.from_toml(POLICIES / f"{n}.toml") for n in ("tiny-coder-ci-task", "tiny-coder-ci"))
    assert task.sampling.seed_scope == "task" and ci.sampling.seed_scope != "task"
    assert task.sampling.max_new_tokens == 64 == ci.sampling.max_new_tokens  # the base's table, merged key by key
    assert _dump(task) == _dump(ci.model_copy(update={"sampling": task.sampling}))
    for f in ("smollm2-135m-ablation.toml", "tiny-coder-ci-task.toml"):  # really one difference, not a copy
        lines = [ln for ln in (POLICIES / f).read_text().splitlines() if ln.strip() and not ln.startswith("#")]
        assert len(lines) == 3 and lines[0].startswith("extends = ")


def test_merge_is_table_by_table_and_arrays_replace():
    base = {"a": 1, "t": {"x": 1, "y": [1, 2], "u": {"k": 1}}, "keep": True}
    assert merge(base, {"a": 2, "t": {"y": [3], "u": {"j": 2}}}) == {
        "a": 2, "t": {"x": 1, "y": [3], "u": {"k": 1, "j": 2}}, "keep": True}


def test_bad_extends_are_one_line(tmp_path):
    (tmp_path / "a.toml").write_text('extends = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extends = "a.toml"\n')
    (tmp_path / "c.toml").write_text('extends = "sub/missing.toml"\n')
    (tmp_path / "d.toml").write_text("extends = 3\n")
    (tmp_path / "e.toml").write_text(f'extends = "{POLICIES / "tiny-coder-ci.toml"}"\n[sampling]\ntemprature = 1\n')
    messages = []
    for name, needle in (("a", "makes a cycle"), ("c", "policy spec not found (extended by"),
                         ("d", "extends must be a file name"),
                         ("e", "e.toml: unknown key 'sampling.temprature'")):  # checked merged
        with pytest.raises(ConfigError) as e:
            PolicySpec.from_toml(tmp_path / f"{name}.toml")
        assert needle in str(e.value)
        messages.append(str(e.value))
    assert messages[1] == f"{tmp_path / 'sub' / 'missing.toml'}: policy spec not found (extended by {tmp_path / 'c.toml'})"
    assert not any("\n" in m for m in messages)


def test_a_loop_config_extends_another_with_its_cluster_table(tmp_path):
    cfg = tmp_path / "mine.toml"
    cfg.write_text(f'extends = "{REPO / "configs" / "ray-local.toml"}"\n[loop]\ngenerations = 1\n')
    mine, base = LoopConfig.from_toml(cfg), LoopConfig.from_toml(REPO / "configs" / "ray-local.toml")
    assert mine.generations == 1 and mine == base.with_overrides(generations=1)
    assert ClusterConfig.from_toml(cfg) == ClusterConfig.from_toml(REPO / "configs" / "ray-local.toml")
    assert ClusterConfig.from_toml(cfg).backend == "ray"


def test_with_model_keeps_every_other_setting():
    base = PolicySpec.from_toml(POLICIES / "qwen2.5-coder-0.5b-instruct.toml")
    mine = base.with_model("/data/my-finetune/")
    assert mine.model == "/data/my-finetune/" and mine.name == "my-finetune" and mine.model_sha256 is None
    assert _dump(mine.model_copy(update={"model": base.model, "model_sha256": base.model_sha256})) == _dump(base)
    assert PolicySpec().with_model("Org/some-coder").name == "some-coder"


def test_a_model_folder_with_the_spec_generates_as_the_spec_does(tiny_model_dir):
    """The embedded CI model named by its folder (``--model DIR``) samples exactly what the spec that
    builds it samples: the same model, tokenizer and sampling settings."""
    from evolve.policy import load_policy

    spec = PolicySpec.from_toml(POLICIES / "tiny-coder-ci.toml")
    prompts = [[{"role": "system", "content": "Write a Python function that solves the task."},
                {"role": "user", "content": "Take the numbers in xs. Return their sum.\ndef f(xs):\nf([1, 2]) == 3"}]]
    mine = spec.with_model(str(tiny_model_dir))
    assert mine.model == str(tiny_model_dir) != spec.model
    texts = []
    for s in (spec, mine):
        pol = load_policy(s)
        try:
            texts.append([c.text for c in pol.generate(prompts, n=3, seed=7)[0]])
        finally:
            pol.close()
    assert texts[0] == texts[1] and len(set(texts[0])) > 1
