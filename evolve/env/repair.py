"""Self-repair environments: turn 1 writes the code; the environment runs the VISIBLE tests in
the sandbox and answers with their failures; up to ``max_turns`` policy turns; the final reward is
the verifier's verdict on the last reply (hidden tests), as in single-turn.

Leakage by construction: the probe task given to the sandbox carries only the visible tests (the
examples the prompt already shows), never ``hidden_tests`` or ``check_code``, so no hidden input
or expected value can reach a message. ``tests/env/test_repair_leakage.py`` checks every message.

Dense reward of a turn = the visible-test pass fraction after it (ReVeal / muCODE style), recorded
on the turn; the final reward is unchanged (hidden tests), so single-turn and repair runs are
judged alike. HumanEval has no structured visible tests: its ``>>>`` docstring examples are
parsed (``doctest_examples``); a task with none ends after turn 1 (nothing visible to repair
against), as does a turn that passes every visible test.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

from evolve.env.base import EnvReply, EpisodeState, Verifying
from evolve.env.suites import SuiteEnv
from evolve.verification.types import Task, TestCase, VerifyResult

MAX_LISTED = 3  # failures quoted per reply (short: small models have small contexts)
_DOCTEST = re.compile(r"^\s*>>>\s*(.+?)\s*$")


@dataclass
class RepairEnv:
    """A suite's tasks as a self-repair episode of at most ``max_turns`` policy turns."""

    base: SuiteEnv
    max_turns: int = 3

    @property
    def name(self) -> str:
        return f"{self.base.name}-repair"

    @property
    def record(self) -> dict | None:
        return self.base.record

    def splits(self) -> dict[str, list[Task]]:
        return self.base.splits()

    def first_messages(self, components: dict[str, str], task: Task) -> list[dict]:
        return self.base.first_messages(components, task)

    def wrap_verifier(self, verifier: Verifying) -> Verifying:
        return self.base.wrap_verifier(verifier)

    def respond(self, verifier: Verifying, states: list[EpisodeState]) -> list[EnvReply]:
        probes = [(visible_probe(s.task), s.reply) for s in states]
        runnable = [i for i, (p, _) in enumerate(probes) if p.visible_tests]
        results = dict(zip(runnable, verifier.verify_batch([probes[i] for i in runnable]), strict=True))
        out = []
        for i, s in enumerate(states):
            res = results.get(i)
            if res is None:
                out.append(EnvReply(None, None, True))
                continue
            frac = visible_fraction(res, len(probes[i][0].visible_tests))
            done = frac >= 1.0 or s.turn >= self.max_turns
            out.append(EnvReply(None if done else feedback(res, s.task.entry_point), frac, done))
        return out


def visible_tests(task: Task) -> tuple[TestCase, ...]:
    """The tests the task shows: its visible tests, else its prompt's ``>>>`` examples."""
    return task.visible_tests or doctest_examples(task.prompt, task.entry_point)


def visible_probe(task: Task) -> Task:
    """The task as the sandbox sees it for feedback: visible tests only, no hidden tests, no check."""
    return dataclasses.replace(task, visible_tests=visible_tests(task), hidden_tests=(), check_code=None)


def doctest_examples(prompt: str, entry_point: str) -> tuple[TestCase, ...]:
    """``>>> f(args)`` followed by a literal result line, as tests (unparseable examples skipped)."""
    lines, out = prompt.splitlines(), []
    for i, line in enumerate(lines[:-1]):
        m = _DOCTEST.match(line)
        if not m or not m.group(1).startswith(f"{entry_point}("):
            continue
        try:
            call = ast.parse(m.group(1), mode="eval").body
            if not isinstance(call, ast.Call) or call.keywords:
                continue
            args = tuple(ast.literal_eval(a) for a in call.args)
            expected = ast.literal_eval(lines[i + 1].strip())
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        out.append(TestCase(args, expected))
    return tuple(out)


def visible_fraction(res: VerifyResult, n: int) -> float:
    """Share of the ``n`` visible tests passed (0 when the code did not load or the reply had none)."""
    stage = next((s for s in res.stages if s.name == "visible" and not s.skipped), None)
    if stage is None:
        return 1.0 if res.passed else 0.0
    return (n - len(stage.failures)) / n if n else 0.0


def feedback(res: VerifyResult, entry_point: str) -> str:
    """The next user message: what went wrong on the visible tests, and what to do."""
    stage = next((s for s in res.stages if s.name == "visible" and not s.skipped), None)
    if stage is not None and stage.failures:
        lines = [f"- {f.message}" for f in stage.failures[:MAX_LISTED]]
        more = len(stage.failures) - MAX_LISTED
        head = f"Your `{entry_point}` failed {len(stage.failures)} of the examples:"
        body = "\n".join([head, *lines] + ([f"- ... and {more} more"] if more > 0 else []))
    else:
        body = f"Your `{entry_point}` does not work yet: {res.trace or res.error_class or 'no result'}"
    return f"{body}\nFix it and reply with the whole corrected function."
