"""The environment seam: built-in names, one-file environments by path or module, one-line errors,
and the docs example run through the episode path on the real sandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from evolve.env import ENVIRONMENTS, Environment, load_environment
from evolve.env.episode import pass_at_k_rows, run_episodes
from evolve.errors import ConfigError
from evolve.prompt.candidate import Candidate
from evolve.verification import Verifier

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "shout_env.py"
SUITES = ("tiny-coder", "tiny-coder-hard", "tiny-coder-chat", "humaneval", "humaneval-chat")


def test_every_suite_and_its_repair_episode_is_registered():
    assert set(ENVIRONMENTS) == set(SUITES) | {f"{s}-repair" for s in SUITES} | {"repo-fix"}
    for name in ("tiny-coder-hard", "humaneval-chat-repair"):
        env = load_environment(name, split_seed=0, heldout_fraction=0.25, max_turns=2)
        assert isinstance(env, Environment) and env.name == name
        parts = env.splits()
        assert parts["train"] and parts["heldout"]
        assert not {t.task_id for t in parts["train"]} & {t.task_id for t in parts["heldout"]}
    assert load_environment("humaneval-chat-repair", max_turns=2).max_turns == 2
    assert load_environment("tiny-coder", max_turns=5).max_turns == 1  # single-turn ignores the knob


@pytest.mark.parametrize("name,needle", [("mbpp", "unknown suite or environment 'mbpp'"),
                                         ("nope/env.py", "environment file not found"),
                                         ("json", "has no load_environment")])
def test_bad_names_are_one_line_config_errors(name, needle):
    with pytest.raises(ConfigError) as e:
        load_environment(name)
    assert needle in str(e.value) and "\n" not in str(e.value)


class RightThenWrong:
    """A scripted policy: the first sample of each prompt is right, the others return None (so a
    repair turn, sampled once per conversation, is right)."""

    def generate(self, prompts, n=None, seed=0):
        right = "def shout(s):\n    return s.upper() + '!'\n"
        wrong = "def shout(s):\n    return None\n"
        return [[SimpleNamespace(text=right if i == 0 else wrong, prompt_text="", prompt_ids=[], completion_ids=[],
                                 logprobs=[], truncated=False) for i in range(n)] for _ in prompts]


@pytest.mark.parametrize("how", ["path", "module"])
def test_the_docs_example_loads_by_path_and_runs_an_episode(how, monkeypatch):
    if how == "module":
        monkeypatch.syspath_prepend(str(EXAMPLE.parent))
        name = "shout_env"
    else:
        name = str(EXAMPLE)
    env = load_environment(name, max_turns=2, split_seed=3)
    assert env.name == "shout" and env.max_turns == 2
    tasks = env.splits()["heldout"]
    with Verifier(None, jobs=2) as v:
        groups = run_episodes(env, RightThenWrong(), env.wrap_verifier(v), Candidate({"system": "Write Python."}),
                              tasks, 3, seed=0)
    for g in groups:
        assert [len(r.turns) for r in g] == [1, 3, 3]  # the wrong ones got one repair turn each
        assert [[t.reward for t in r.turns if t.role == "assistant"] for r in g] == [[1.0], [0.0, 1.0], [0.0, 1.0]]
        assert "Not yet" in g[1].turns[1].content and all(r.passed for r in g)
    rows = pass_at_k_rows([r for g in groups for r in g], [1, 3])
    assert all(row["pass@1"] == 1.0 and row["n"] == 3 for row in rows.values())
    env1 = load_environment(name, max_turns=1)  # one turn: no repair, the wrong ones stay wrong
    with Verifier(None, jobs=2) as v:
        groups = run_episodes(env1, RightThenWrong(), v, Candidate({"system": "Write Python."}), tasks, 3, seed=0)
    assert [[r.passed for r in g] for g in groups] == [[True, False, False]] * len(tasks)
    sys.modules.pop("shout_env", None)


def test_old_suite_keys_give_one_line(tmp_path):
    """The [suite] keys that were never read (generator, pipeline, completion) are refused by name."""
    from evolve.gym import load_gym

    old = tmp_path / "old.toml"
    old.write_text('[suite]\nname = "tiny-coder"\ngenerator = "evolve.gym"\nseed = 0\n')
    with pytest.raises(ConfigError) as e:
        load_gym("train", suite=old)
    assert "'generator' is not read" in str(e.value) and "\n" not in str(e.value)
    old.write_text('[suite]\nname = "tiny-coder"\nseed = 0\n[generator]\nvisible = 2\n')
    assert load_gym("heldout", suite=old, n=2)


def test_the_docs_page_shows_the_example_as_it_is():
    page = (REPO / "docs" / "environments.md").read_text()
    block = page.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == EXAMPLE.read_text()
