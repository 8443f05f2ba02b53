"""Self-repair environments on the real sandbox: hidden tests never reach a message, per-turn
rewards are recorded, and the final reward comes from the hidden tests.

The policy here is scripted (an adversary that satisfies ``evolve.env.Generator``): it writes code
that echoes its arguments in an exception, the cheapest way for a hostile model to read test data
out of the feedback. Everything else is real: tasks, environments, the bubblewrap sandbox."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evolve.env import load_environment
from evolve.env.episode import run_episodes
from evolve.prompt.candidate import Candidate
from evolve.verification import Verifier
from evolve.verification.rewrite import rewrite_check
from evolve.verification.stages.base import call_repr

ECHO = "def {f}(*a, **k):\n    raise ValueError('args were ' + repr(a))\n"
WRONG = "def {f}(*a, **k):\n    return 12345\n"


class Scripted:
    """A policy whose replies are ``script(task entry point, turn number)``; chat suites get a fence."""

    def __init__(self, script, fence: bool = False):
        self.script, self.fence, self.calls = script, fence, 0

    def generate(self, prompts, n=None, seed=0):
        self.calls += 1
        out = []
        for msgs in prompts:
            turn = 1 + sum(m["role"] == "assistant" for m in msgs)
            entry = _entry(msgs)
            text = self.script(entry, turn)
            text = f"```python\n{text}```" if self.fence else text
            out.append([SimpleNamespace(text=text, prompt_text="", prompt_ids=[], completion_ids=[], logprobs=[],
                                        truncated=False) for _ in range(n or 1)])
        return out


def _entry(msgs) -> str:
    import re

    user = next(m["content"] for m in msgs if m["role"] == "user")
    m = re.search(r"function `(\w+)`", user) or re.search(r"def (\w+)\(", user)
    return m.group(1)


def hidden_calls(task) -> list[str]:
    tests = task.hidden_tests or rewrite_check(task.check_code, task.entry_point).tests
    return [call_repr(task.entry_point, tuple(t.inputs)) for t in tests]


def _episodes(name: str, n_tasks: int, script, fence: bool):
    env = load_environment(name, max_turns=3)
    tasks = env.splits()["heldout"]
    if name.startswith("humaneval"):  # the problems whose docstring shows runnable examples
        from evolve.env.repair import visible_tests

        tasks = [t for t in tasks if visible_tests(t)]
    tasks = tasks[:n_tasks]
    with Verifier(None, jobs=2) as base:
        groups = run_episodes(env, Scripted(script, fence), env.wrap_verifier(base), Candidate({"system": "x"}),
                              tasks, 1, seed=0)
    return tasks, [g[0] for g in groups]


@pytest.mark.parametrize("name,fence", [("tiny-coder-repair", False), ("tiny-coder-chat-repair", True),
                                        ("humaneval-chat-repair", True)])
def test_hidden_tests_never_appear_in_any_message(name, fence):
    tasks, rolls = _episodes(name, 6, lambda f, turn: ECHO.format(f=f), fence)
    checked = 0
    for task, r in zip(tasks, rolls, strict=True):
        env_msgs = [t.content for t in r.turns if t.role != "assistant"]
        assert env_msgs, "the echoing code fails its visible tests, so the environment must answer"
        assert "args were" in env_msgs[0]  # the adversary's channel works: the feedback shows its output
        shown = "\n".join(m["content"] for m in r.messages)
        for call in hidden_calls(task):
            if call in shown:  # the prompt itself shows this example: visible, not hidden
                continue
            checked += 1
            for msg in env_msgs:
                assert call not in msg, f"{task.task_id}: hidden call {call} leaked into {msg!r}"
    assert checked >= 10


def test_turn_rewards_and_final_reward_from_hidden_tests():
    """Wrong first, right second: turn rewards (visible fraction) 0 then 1; the final reward is the
    hidden tests' verdict on the last turn; an episode that passes its visible tests ends there."""
    env = load_environment("tiny-coder-repair", max_turns=3)
    tasks = env.splits()["heldout"][:4]
    solutions = {t.entry_point + str(i): t.canonical_solution for i, t in enumerate(tasks)}
    by_prompt = {t.prompt: t.canonical_solution for t in tasks}

    class FixOnSecond(Scripted):
        def generate(self, prompts, n=None, seed=0):
            out = []
            for msgs in prompts:
                turn = 1 + sum(m["role"] == "assistant" for m in msgs)
                text = WRONG.format(f="f") if turn == 1 else by_prompt[msgs[-3]["content"] if turn > 1 else ""]
                out.append([SimpleNamespace(text=text, prompt_text="", prompt_ids=[], completion_ids=[],
                                            logprobs=[], truncated=False) for _ in range(n or 1)])
            return out

    assert solutions
    with Verifier(None, jobs=2) as v:
        groups = run_episodes(env, FixOnSecond(None), v, Candidate({"system": "x"}), tasks, 2, seed=0)
    for g in groups:
        for r in g:
            assert [t.role for t in r.turns] == ["assistant", "user", "assistant"]
            assert [t.reward for t in r.turns if t.role == "assistant"] == [0.0, 1.0]
            assert r.passed and r.reward == 1.0 and r.completion == r.turns[-1].content
            assert r.turns[0].observation_hash == g[0].turns[0].observation_hash  # one anchor state per task
            assert r.turns[2].observation_hash != r.turns[0].observation_hash


def test_single_turn_environment_keeps_the_old_rollout_shape():
    env = load_environment("tiny-coder")
    tasks = env.splits()["heldout"][:2]
    with Verifier(None, jobs=2) as v:
        groups = run_episodes(env, Scripted(lambda f, turn: WRONG.format(f=f)), v, Candidate({"system": "x"}),
                              tasks, 2, seed=0)
    for g in groups:
        for r in g:
            assert r.turns == [] and r.completion_mask == [] and not r.passed
