"""An example environment in one file: `evolve run` / `evolve eval --suite docs/examples/shout_env.py`.

It shows the whole ``evolve.env.Environment`` protocol with nothing else: a handful of string tasks,
the default rendering of a prompt candidate, and a second turn that quotes the failing *visible*
examples (never the hidden ones). ``load_environment(**options)`` is what ``evolve.env`` calls; it
receives the loop's options (``max_turns``, ``split_seed``, ...) and takes the ones it wants.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolve.env import EnvReply
from evolve.env.render import render_messages
from evolve.verification.types import Task, TestCase

WORDS = ["hello", "evolve", "agent", "sandbox", "reward", "policy", "prompt", "lineage"]


def _task(i: int, word: str) -> Task:
    visible = (TestCase((word,), word.upper() + "!"),)
    hidden = (TestCase((word[::-1],), word[::-1].upper() + "!"), TestCase(("",), "!"))
    prompt = f"Write `def shout(s)` that returns s in upper case followed by '!'.\n>>> shout({word!r})\n{word.upper()!r}!"
    return Task(f"shout/{i}", prompt, "shout", visible, hidden, suite="shout")


@dataclass
class ShoutEnv:
    name: str = "shout"
    max_turns: int = 2

    def splits(self) -> dict[str, list[Task]]:
        tasks = [_task(i, w) for i, w in enumerate(WORDS)]
        return {"train": tasks[:6], "heldout": tasks[6:]}

    def first_messages(self, components: dict[str, str], task: Task) -> list[dict]:
        return render_messages(components, task)

    def wrap_verifier(self, verifier):
        return verifier

    def respond(self, verifier, states) -> list[EnvReply]:
        # Run only the visible test: the probe task carries no hidden test at all.
        probes = [(Task(s.task.task_id, s.task.prompt, s.task.entry_point, s.task.visible_tests), s.reply)
                  for s in states]
        out = []
        for s, res in zip(states, verifier.verify_batch(probes), strict=True):
            if res.passed or s.turn >= self.max_turns:
                out.append(EnvReply(None, 1.0 if res.passed else 0.0, True))
            else:
                out.append(EnvReply(f"Not yet: {res.trace}. Reply with the corrected function.", 0.0, False))
        return out


def load_environment(max_turns: int = 2, **_options) -> ShoutEnv:
    return ShoutEnv(max_turns=max_turns)
