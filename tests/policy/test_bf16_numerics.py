"""bf16 training numerics on every CPU kind: the comparison of tests/policy/bf16_numerics.py on the shipped
tiny-coder model (the same file on every machine) with LoRA, where the real-model version needs bf16 kernels
to finish (test_real_qwen.py). On a CPU without them bf16 runs emulated here too, which a model this size
affords; it checks the same path: the bf16 load, LoRA in float32 under peft, the GRPO backward, the log-probs.

Tolerances: measured on the shipped CI-preset model (2026-12-03, an AMD EPYC with avx512_bf16, no AMX): mean
log-prob rel. diff 0.00012, LoRA-grad cosine 0.99996, grad-norm rel. diff 0.0022; about 10x room, as for the 0.5B."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from bf16_numerics import answer_groups, bf16_against_float32

REPO = Path(__file__).resolve().parents[2]
LOGP_RTOL, GRAD_COS_MIN, GRAD_NORM_RTOL = 0.0015, 0.9996, 0.02


@pytest.fixture(scope="module")
def lora_spec(tiny_model_dir):
    from evolve.policy import PolicySpec

    return PolicySpec.from_dict({"model": str(tiny_model_dir), "finetune": "lora", "threads": 1, "seed": 0,
                                 "lora": {"r": 8, "alpha": 16, "dropout": 0.0,
                                          "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}})


def _groups(tokenizer):
    from evolve.gym import load_gym
    from evolve.gym.teacher import teacher_solution
    from evolve.prompt import load_seed_prompt

    comp = dict(load_seed_prompt(REPO / "prompts" / "tiny-coder.toml").components)
    tasks = load_gym("train", seed=0, n=4)
    no_bugs = {"EMPTY": 0.0, "DIV": 0.0, "OFF1": 0.0, "CMP": 0.0}
    return answer_groups(tokenizer, comp, tasks,
                         lambda t: [teacher_solution(t, random.Random(t.task_id), "", no_bugs)[0], "return None"])


def test_bf16_training_matches_float32_on_the_small_model(lora_spec):
    d = bf16_against_float32(lora_spec, _groups)
    assert d["logp_rel"] < LOGP_RTOL and d["grad_cos"] > GRAD_COS_MIN and d["grad_norm_rel"] < GRAD_NORM_RTOL
