"""repo-fix through the one episode path (collect + verify) with a scripted policy: GiGPO anchors
are the working copy's state, and the final reward is judged on the whole transcript."""

from __future__ import annotations

import json
from dataclasses import dataclass

from repo_helpers import ScriptedSample

from evolve.env.episode import run_episodes


@dataclass
class _Prompt:
    components: dict
    id: str = "p"


class ScriptedPolicy:
    """Two fixed trajectories: A reads then fixes; B searches then fixes the same way."""

    def __init__(self, fix: str):
        self.plans = {"A": [json.dumps({"tool": "read", "path": "minicalc/__init__.py"}), fix, '{"tool": "submit"}'],
                      "B": [json.dumps({"tool": "search", "pattern": "def "}), fix, '{"tool": "submit"}']}

    def generate(self, prompts, n=None, seed=0):
        out = []
        for msgs in prompts:
            mine = [m["content"] for m in msgs if m["role"] == "assistant"]
            if not mine:
                out.append([ScriptedSample(self.plans["A"][0]), ScriptedSample(self.plans["B"][0])][: n or 1])
                continue
            plan = self.plans["A" if mine[0] == self.plans["A"][0] else "B"]
            out.append([ScriptedSample(plan[len(mine)])])
        return out


def test_anchors_are_working_copy_states_and_the_transcript_is_judged(env):
    task = env.splits()["train"][0]
    diff = task.meta["diff"].splitlines()
    minus = "\n".join(ln[1:] for ln in diff if ln.startswith("-") and not ln.startswith("---"))
    plus = "\n".join(ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++"))
    fix = json.dumps({"tool": "edit", "path": task.meta["file"], "search": plus, "replace": minus})
    (group,) = run_episodes(env, ScriptedPolicy(fix), env.wrap_verifier(None), _Prompt({}), [task], 2, 0)
    a, b = group
    anchors = [[t.observation_hash for t in r.turns if t.role == "assistant"] for r in (a, b)]
    assert len(anchors[0]) == len(anchors[1]) == 3
    # turn 1 and 2 act on the buggy copy (read / search change nothing), turn 3 on the fixed copy:
    assert anchors[0] == anchors[1] and anchors[0][0] == anchors[0][1] != anchors[0][2]
    assert a.turns[1].content != b.turns[1].content  # different conversations, same states
    assert a.passed and b.passed and a.reward == b.reward == 1.0  # the last turn is "submit": the edit counts
