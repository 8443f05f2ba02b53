"""Reflection reads transcripts: a repair episode's record shows every turn, so a lesson can
address the repair behaviour; single-turn records keep their old shape."""

from __future__ import annotations

import random

from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.reflective_dataset import build_reflective_dataset
from evolve.rollout import Rollout, Turn
from evolve.verification.types import StageResult, TestFailure, VerifyResult


def _failed(task: str) -> VerifyResult:
    f = TestFailure("hidden", "WrongAnswer", "f([]) expected 0, got None", "f([])", "0", "None")
    return VerifyResult(task, 0.0, False, [StageResult("hidden", 0.0, False, "hidden test 1/3 failed", "WrongAnswer",
                                                       [f])], "hidden test 1/3 failed", "WrongAnswer")


def test_the_reflective_dataset_shows_the_repair_turns():
    turns = [Turn("assistant", "def f(xs):\n    return xs[0]\n", 0.5),
             Turn("user", "Your `f` failed 1 of the examples:\n- IndexError at f([])"),
             Turn("assistant", "def f(xs):\n    return xs[0] if xs else None\n", 0.5)]
    multi = Rollout("t/1", 0, 0, "p", "w", [{"role": "user", "content": "task one"}], "", turns[-1].content,
                    _failed("t/1"), 0.0, turns=turns)
    single = Rollout("t/2", 1, 0, "p", "w", [{"role": "user", "content": "task two"}], "", "def f(xs): pass",
                     _failed("t/2"), 0.0)
    ds = build_reflective_dataset([multi, single], PromptEvolutionConfig(), random.Random(0))
    by_task = {r["task_id"]: r for r in ds.records}
    rec = by_task["t/1"]
    assert rec["turns"] == 2
    text = rec["transcript"]
    assert "return xs[0]\n" in text and "IndexError at f([])" in text and "if xs else None" in text
    assert text.index("IndexError") < text.index("if xs else None")  # in the order they happened
    assert "visible tests 0.50" in text
    assert "transcript" not in by_task["t/2"] and "turns" not in by_task["t/2"]


def test_the_lm_reflector_request_carries_the_episode():
    from evolve.prompt.reflect.lm_rule import render_rule_prompt

    def build(ds):
        return render_rule_prompt("", ds.records, ds.groups, ds.n_failures, ds.n_rollouts)

    turns = [Turn("assistant", "def f(xs):\n    return xs[0]\n", 0.0), Turn("user", "IndexError at f([1])"),
             Turn("assistant", "def f(xs):\n    return 1\n", 1.0)]
    multi = Rollout("t/1", 0, 0, "p", "w", [{"role": "user", "content": "task"}], "", turns[-1].content,
                    _failed("t/1"), 0.0, turns=turns)
    single = Rollout("t/2", 1, 0, "p", "w", [{"role": "user", "content": "task"}], "", "x", _failed("t/2"), 0.0)
    ds = build_reflective_dataset([multi], PromptEvolutionConfig(), random.Random(0))
    text = build(ds)
    assert "2 policy turns" in text and "IndexError at f([1])" in text
    ds1 = build_reflective_dataset([single], PromptEvolutionConfig(), random.Random(0))
    assert "policy turns" not in build(ds1)
