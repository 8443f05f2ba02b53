"""Prompt-only evolution with the offline reflector and frozen weights gains pass@1 on the gym.

Two frozen policies, both judged by the real sandboxed verifier on tasks and seeds the
evolution never saw:
- the gym's imperfect teacher as a policy: causal by construction (a note line switches its
  bug mode off), so the test checks that reflection + selection find those lines in a
  library full of same-tagged lessons and distractors, without being told which help;
- the tiny model trained on that teacher (see test_gain_tiny_model).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evolve.gym import load_gym
from evolve.gym.notes import NOTES
from evolve.prompt import (
    MemoryRecorder,
    PromptEvolutionConfig,
    PromptEvolver,
    load_seed_prompt,
    make_reflector,
)
from evolve.prompt.adapter import roll_out_candidate
from evolve.prompt.driver import DriverConfig, evolve_prompt_only
from evolve.prompt.lessons import split_lessons

REPO = Path(__file__).resolve().parents[2]
SEED = load_seed_prompt(REPO / "prompts" / "tiny-coder.toml")
RATES = {"EMPTY": 0.45, "DIV": 0.45, "OFF1": 0.45, "CMP": 0.9}  # the default bootstrap preset's bug rates


class TeacherPolicy:
    """The gym's imperfect teacher behind the policy API (frozen: it cannot be updated)."""

    can_update = False

    def __init__(self, tasks):
        self.by_prompt = {t.prompt: t for t in tasks}

    def generate(self, prompts, n=1, seed=0):
        from evolve.gym.teacher import teacher_solution
        from evolve.policy.sample import Sample

        out = []
        for messages in prompts:
            system = "\n".join(m["content"] for m in messages if m["role"] == "system")
            task = self.by_prompt[messages[-1]["content"]]
            group = []
            for j in range(n):
                code, _ = teacher_solution(task, random.Random(f"{seed}|{task.task_id}|{j}"), system, RATES)
                group.append(Sample(code, system + "\n" + task.prompt))
            out.append(group)
        return out


def pass_at_1(policy, verifier, cand, tasks, n, seed) -> float:
    groups = roll_out_candidate(policy, verifier, cand, tasks, n, seed, purpose="heldout")
    return sum(r.passed for g in groups for r in g) / sum(len(g) for g in groups)


def test_offline_prompt_evolution_gains_heldout_pass_at_1_with_the_teacher_policy():
    from evolve.verification import Verifier

    train, heldout = load_gym("train", seed=0), load_gym("heldout", seed=0)
    rng = random.Random(0)
    rng.shuffle(train)
    val, reflect_on = train[:16], train[16:]
    policy = TeacherPolicy(train + heldout)
    cfg = PromptEvolutionConfig(proposals_per_step=3, max_lessons=3)
    ev = PromptEvolver(cfg, make_reflector(cfg, MemoryRecorder()), SEED)
    with Verifier(jobs=2) as v:
        before = pass_at_1(policy, v, SEED, heldout, 4, seed=12345)
        res = evolve_prompt_only(ev, policy, v, reflect_on, val,
                                 DriverConfig(steps=5, tasks_per_step=12, samples_per_task=2, minibatch_tasks=12))
        after = pass_at_1(policy, v, res.best, heldout, 4, seed=12345)
    lessons = split_lessons(res.best.components.get("lessons", ""))
    print(f"teacher held-out pass@1 {before:.3f} -> {after:.3f}; lessons {lessons}")
    assert after >= before + 0.10
    assert set(lessons) & set(NOTES.values())  # it found at least one causal line, untold
    accepted = [p for s in res.steps for p in s["proposals"] if p["accepted"]]
    assert accepted and all(p["minibatch"] > p["parent_minibatch"] for p in accepted if p["kind"] != "merge")


def _default_tiny_model() -> Path | None:
    import os

    from evolve.policy.tiny import BootstrapConfig, is_complete, model_dir

    env = os.environ.get("EVOLVE_TINY_MODEL")
    path = Path(env) if env else model_dir(BootstrapConfig.preset("default"), REPO / "runs")
    return path if is_complete(path) else None


@pytest.mark.slow
def test_offline_prompt_evolution_gains_pass_at_1_with_the_frozen_tiny_model():
    """Needs the default tiny-coder model (`evolve bootstrap`, ~10-15 min on 2 cores; or $EVOLVE_TINY_MODEL).

    The CI preset model is too weak for this (held-out pass@1 ~0), so it is not used here; the
    engine's mechanics on the CI model are covered by test_gepa_adapter.py.
    """
    model = _default_tiny_model()
    if model is None:
        pytest.skip("default tiny-coder model not built (run `evolve bootstrap`, or set EVOLVE_TINY_MODEL)")
    import torch

    from evolve.policy import PolicySpec, load_policy
    from evolve.verification import Verifier

    torch.set_num_threads(1)
    policy = load_policy(PolicySpec.from_dict({"model": str(model), "seed": 0, "threads": 1,
                                               "sampling": {"temperature": 1.0, "max_new_tokens": 120}}))
    train, heldout = load_gym("train", seed=0), load_gym("heldout", seed=0)
    rng = random.Random(0)
    rng.shuffle(train)
    heldout = random.Random(1).sample(heldout, 60)
    cfg = PromptEvolutionConfig(proposals_per_step=3, max_lessons=3)
    ev = PromptEvolver(cfg, make_reflector(cfg, MemoryRecorder()), SEED)
    with Verifier(jobs=2) as v:
        before = pass_at_1(policy, v, SEED, heldout, 8, seed=4242)
        # The configuration of the measured run (prompts/README.md): 40 validation tasks, 6 steps.
        res = evolve_prompt_only(ev, policy, v, train[40:], train[:40],
                                 DriverConfig(steps=6, tasks_per_step=12, samples_per_task=4, minibatch_tasks=12))
        after = pass_at_1(policy, v, res.best, heldout, 8, seed=4242)
    print(f"tiny model held-out pass@1 {before:.3f} -> {after:.3f}; best {res.best.components}")
    # Held-out tasks and sampling seeds are never seen by the evolution; 320 samples per side.
    assert res.best.id != SEED.id and after > before
