"""repo-fix episodes driven by a scripted policy (fixed tool calls): tools, errors, isolation, reward."""

from __future__ import annotations

import glob
import json
import tempfile

from evolve.env.base import EpisodeState
from evolve.repo.factory import load_repo_tasks


def _call(**kw) -> str:
    return json.dumps(kw)


def _episode(env, task, replies: list[str]):
    """Answer each reply in turn as the episode path would; returns the observations."""
    msgs = env.first_messages({"system": "fix it"}, task)
    obs = []
    for turn, reply in enumerate(replies, 1):
        msgs = msgs + [{"role": "assistant", "content": reply}]
        (ans,) = env.respond(None, [EpisodeState(task, msgs, reply, turn)])
        obs.append(ans)
        if ans.message is not None:
            msgs = msgs + [{"role": "user", "content": ans.message}]
    return msgs, obs


def _fix(task) -> str:
    minus = [ln[1:] for ln in task.meta["diff"].splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in task.meta["diff"].splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return _call(tool="edit", path=task.meta["file"], search="\n".join(plus), replace="\n".join(minus))


def test_tools_answer_and_a_scripted_fix_resolves_the_task(env):
    task = env.splits()["train"][0]
    msgs, obs = _episode(env, task, [
        _call(tool="list", path="."),
        _call(tool="search", pattern="def "),
        _call(tool="read", path=task.meta["file"], start=1, end=5),
        _call(tool="test"),
        _fix(task),
        _call(tool="test"),
        _call(tool="submit"),
    ])
    assert "minicalc/__init__.py" in obs[0].message and "tests/test_minicalc.py" in obs[0].message
    assert "def clamp" in obs[1].message and "    1 " in obs[2].message
    assert obs[3].reward == 0.0 and "failed" in obs[3].message
    assert obs[4].message.startswith("edited")
    assert obs[5].reward == 1.0 and obs[6].done and obs[6].message is None
    verifier = env.wrap_verifier(None)
    (res,) = verifier.verify_conversations([(task, msgs)])
    assert res.passed and res.reward == 1.0
    (unfixed,) = verifier.verify_conversations([(task, msgs[:2])])
    assert not unfixed.passed and unfixed.reward == 0.0


def test_bad_tool_calls_are_observations_never_exceptions(env):
    task = env.splits()["train"][0]
    env.max_turns = 9
    _, obs = _episode(env, task, [
        "I think the bug is in clamp.",
        _call(tool="rm", path="."),
        _call(tool="read"),
        _call(tool="read", path="../../../etc/passwd"),
        _call(tool="read", path="/etc/passwd"),
        _call(tool="read", path=task.meta["file"], start="one"),
        _call(tool="edit", path=task.meta["file"], search="return", replace="return"),
        _call(tool="test", tests="--co"),
        '{"tool": "read", "path": ',
    ])
    msgs = [o.message for o in obs]
    assert all(m.startswith("error:") for m in msgs[:-1]), msgs
    assert "no tool call" in msgs[0] and "unknown tool" in msgs[1] and "missing argument 'path'" in msgs[2]
    assert "outside the repository" in msgs[3] and "relative" in msgs[4] and "must be int" in msgs[5]
    assert "occurs" in msgs[6] and "no options" in msgs[7]
    assert obs[-1].done  # max_turns reached: the episode ends


def test_episodes_are_isolated_and_leave_no_copy_behind(env):
    task = env.splits()["train"][0]
    before = set(glob.glob(tempfile.gettempdir() + "/evolve-repo-*"))
    m1, _ = _episode(env, task, [_call(tool="edit", path="minicalc/__init__.py", search='"""minicalc:',
                                       replace='"""EDITED-BY-EPISODE-ONE minicalc:')])
    _, obs = _episode(env, task, [_call(tool="search", pattern="EDITED-BY-EPISODE-ONE")])
    assert obs[0].message.startswith("no match")
    # the same transcript rebuilds the same state; another transcript's state is another anchor
    assert env.state_hash(task, m1) == env.state_hash(task, m1)
    assert env.state_hash(task, m1) != env.state_hash(task, m1[:2])
    assert set(glob.glob(tempfile.gettempdir() + "/evolve-repo-*")) == before


def test_tasks_file_has_no_field_the_agent_sees_that_holds_the_fix(minicalc_build):
    out, _ = minicalc_build
    for t in load_repo_tasks(out / "tasks.jsonl"):
        assert t.meta["diff"] not in t.prompt
