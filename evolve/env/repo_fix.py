"""``repo-fix``: a tool-using episode in a real package with an injected bug (``evolve repo-tasks build``).

Each policy turn is one tool call (``evolve.repo.tools``: list, read, search, edit, test, submit);
the environment answers with the observation. The working copy is never kept between turns: it is
rebuilt for every answer from the pristine sdist + the buggy file + the edits of the episode's
earlier replies (replayed in order) in a fresh temporary folder that is removed right after, so
episodes cannot see each other and the state is a pure function of the transcript. Tests run in the
bubblewrap view of ``evolve.repo.runner`` on the graded tree (the same tree and command the final
run uses). Dense reward of a ``test`` turn: the share of the task's FAIL_TO_PASS tests that passed
in it; final reward: the hidden FAIL_TO_PASS + PASS_TO_PASS run on the state after the last turn
(1.0 when every one passes, SWE-bench's "resolved"). GiGPO's anchor state is the working copy's
content hash (``state_hash``), not the conversation. Choice of isolation: bubblewrap, not Docker
(docs/repo_tasks.md): the project already requires bwrap, a run starts in milliseconds, no daemon.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evolve.env.base import EnvReply, EpisodeState, Verifying
from evolve.env.render import render_messages
from evolve.errors import ConfigError, EvolveError
from evolve.repo.factory import load_repo_tasks, sandbox_paths
from evolve.repo.packages import PackageSpec
from evolve.repo.runner import ISOLATION, RunResult, run_tests
from evolve.repo.tools import MAX_PATH, TOOLS, ToolError, parse_call, replay_edits, run_tool
from evolve.verification.types import StageResult, Task, TestFailure, VerifyResult

DEFAULT_TASKS = "runs/repo-tasks/tasks.jsonl"
MAX_OBS = 2500
INSTRUCTIONS = ("You are fixing a bug in the repository. Each reply is ONE tool call, a JSON object:\n"
                + "\n".join(f"- {v}" for v in TOOLS.values()) +
                "\nOne call per reply. Submit when the failing tests pass.")


def _spec(task: Task) -> PackageSpec:
    m = task.meta
    return PackageSpec(name=m["package"], version=m["version"], sha256=m["sha256"], license="", source=[m["file"]],
                       tests=[], python_path=m["python_path"])


def _bug(task: Task) -> tuple[str, bytes]:
    """The task's injected file as the working copy holds it (``workspace`` writes it as UTF-8)."""
    return task.meta["file"], task.meta["buggy_source"].encode("utf-8")


@dataclass
class RepoFixEnv:
    tasks_path: Path
    max_turns: int = 8
    name: str = "repo-fix"
    _tasks: list[Task] | None = field(default=None, repr=False)

    @property
    def cache(self) -> Path:
        return self.tasks_path.parent / "cache"

    def pristine(self, task: Task) -> Path:
        p = self.cache / "src" / f"{task.meta['package']}-{task.meta['version']}"
        if not p.is_dir():
            raise ConfigError(f"pristine tree missing: {p} (rebuild: evolve repo-tasks build)")
        return p

    def splits(self) -> dict[str, list[Task]]:
        if self._tasks is None:
            self._tasks = load_repo_tasks(self.tasks_path)
        return {s: [t for t in self._tasks if t.meta.get("split") == s] for s in ("train", "heldout")}

    def first_messages(self, components: dict[str, str], task: Task) -> list[dict]:
        msgs = render_messages(components, task)
        msgs[-1] = {"role": "user", "content": f"{INSTRUCTIONS}\n\n{task.prompt}"}
        return msgs

    def wrap_verifier(self, verifier: Verifying) -> RepoVerifier:
        return RepoVerifier(self)

    @contextlib.contextmanager
    def workspace(self, task: Task, replies: list[str]) -> Iterator[Path]:
        """A fresh copy: pristine + the bug + the edits of ``replies``; removed on exit."""
        tmp = Path(tempfile.mkdtemp(prefix="evolve-repo-ep-"))
        try:
            root = tmp / "repo"
            shutil.copytree(self.pristine(task), root)
            (root / task.meta["file"]).write_text(task.meta["buggy_source"], encoding="utf-8")
            replay_edits(root, replies)
            yield root
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def state_hash(self, task: Task, messages: list[dict]) -> str:
        """GiGPO anchor: the content of the working copy the policy acts on (paths and bytes)."""
        replies = [m["content"] for m in messages if m.get("role") == "assistant"]
        h = hashlib.sha256(task.task_id.encode())
        with self.workspace(task, replies) as root:
            for p in sorted(root.rglob("*")):
                if p.is_file():
                    h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def respond(self, verifier: Verifying, states: list[EpisodeState]) -> list[EnvReply]:
        return [self._answer(s) for s in states]

    def _answer(self, s: EpisodeState) -> EnvReply:
        replies = [m["content"] for m in s.messages if m.get("role") == "assistant"]
        if replies and replies[-1] == s.reply:
            replies = replies[:-1]
        reward = None
        with self.workspace(s.task, replies) as root:
            try:
                call = parse_call(s.reply)
                if call.tool == "submit":
                    return EnvReply(None, None, True)
                if call.tool == "test":
                    obs, reward = self._test(s.task, root, call.args.get("tests"))
                else:
                    obs = run_tool(root, call)
            except ToolError as e:
                obs = f"error: {e}"
            except (OSError, UnicodeError, ValueError) as e:  # a check above missed a case: still an answer
                obs = f"error: {type(e).__name__}: {str(e)[:200]}"
        done = s.turn >= self.max_turns
        return EnvReply(None if done else obs[:MAX_OBS], reward, done)

    def _test(self, task: Task, root: Path, tests) -> tuple[str, float]:
        f2p = task.meta["fail_to_pass"]
        if tests is None:
            tests = f2p
        if isinstance(tests, str):
            tests = [tests]
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t for t in tests):
            raise ToolError("test: tests must be a list of test ids or files (usage: " + TOOLS["test"] + ")")
        if any(t.startswith("-") or t.startswith("/") or ".." in t for t in tests):
            raise ToolError("test: give test ids or files relative to the root, no options")
        if any(len(t) > MAX_PATH or "\x00" in t or not _encodable(t) for t in tests):  # the run's argv takes them
            raise ToolError(f"test: a test id must be valid Unicode text without NUL, at most {MAX_PATH} characters")
        res = run_tests(self.pristine(task), root, tests[:50], sandbox_paths(_spec(task)), bug=_bug(task))
        return summarize(res), sum(res.passed(n) for n in f2p) / len(f2p)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def summarize(res: RunResult) -> str:
    if res.hack or res.invalid:
        return f"error: {res.hack or res.invalid}"
    counts: dict[str, int] = {}
    for o in res.outcomes.values():
        counts[o] = counts.get(o, 0) + 1
    head = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no tests ran"
    if not res.complete:
        head += " (the run did not finish)"
    fails = [f"{n}\n{t[-600:]}" for n, t in res.failures.items()][:3]
    tail = res.output[-800:] if not res.outcomes else ""
    return "\n\n".join([head, *fails] + ([tail] if tail else []))


@dataclass
class RepoVerifier:
    """The final reward: hidden FAIL_TO_PASS + PASS_TO_PASS on the episode's last state."""

    env: RepoFixEnv
    # What the run records as ``verifier_isolation``: pytest in bubblewrap namespaces (read-only view,
    # no network) under the function sandbox's seccomp filter and rlimits (evolve/repo/launch.py).
    isolation: str = ISOLATION

    def verify_conversations(self, pairs: list[tuple[Task, list[dict]]]) -> list[VerifyResult]:
        out = []
        for task, messages in pairs:
            replies = [m["content"] for m in messages if m.get("role") == "assistant"]
            try:
                with self.env.workspace(task, replies) as root:
                    out.append(self.grade(task, root))
            except EvolveError:  # the machine's or the task file's fault (no bwrap, no pristine tree)
                raise
            except Exception as e:  # noqa: BLE001 - whatever the transcript holds, the batch gets a verdict
                out.append(_grader_error(task, e))
        return out

    def verify_batch(self, pairs: list[tuple[Task, str]]) -> list[VerifyResult]:
        return self.verify_conversations([(t, [{"role": "assistant", "content": c}]) for t, c in pairs])

    def grade(self, task: Task, root: Path | None) -> VerifyResult:
        f2p, p2p = task.meta["fail_to_pass"], task.meta["pass_to_pass"]
        res = run_tests(self.env.pristine(task), root, f2p + p2p, sandbox_paths(_spec(task)), bug=_bug(task))
        f_ok = [n for n in f2p if res.passed(n)]
        p_ok = [n for n in p2p if res.passed(n)]
        resolved = len(f_ok) == len(f2p) and len(p_ok) == len(p2p)
        vis = StageResult("visible", len(f_ok) / len(f2p), len(f_ok) == len(f2p), failures=[
            TestFailure("visible", "TestFailure", f"{n}: {_last(res.failures.get(n, 'did not pass'))}")
            for n in f2p if n not in f_ok], duration_s=res.seconds)
        hid = StageResult("hidden", len(p_ok) / max(1, len(p2p)), len(p_ok) == len(p2p))
        loc = StageResult("location", 0.0, resolved, trace=f"{task.meta['file']}: {task.meta['function']}",
                          skipped=True)
        trace = "" if resolved else _why(res, f2p, vis)
        return VerifyResult(task.task_id, 1.0 if resolved else 0.0, resolved, [vis, hid, loc], trace=trace[:500],
                            error_class=None if resolved else _error_class(res),
                            hack_flags=[res.hack] if res.hack else [], duration_s=res.seconds)

    def close(self) -> None:
        return None


def _grader_error(task: Task, e: Exception) -> VerifyResult:
    trace = f"the grader could not judge this transcript: {type(e).__name__}: {str(e)[:300]}"
    return VerifyResult(task.task_id, 0.0, False, [StageResult("visible", 0.0, False, trace=trace)], trace=trace,
                        error_class="GraderError")


def _error_class(res: RunResult) -> str:
    return "Hack" if res.hack else "InvalidEdit" if res.invalid else "TestFailure"


def _why(res: RunResult, f2p: list[str], vis: StageResult) -> str:
    """The trace of a failed grade: a refused edit, an error outside the tests (at collection, e.g.
    package code that fails at import), a run that never finished, or the first failing test."""
    if res.hack or res.invalid:
        return res.hack or res.invalid
    other = [(n, t) for n, t in res.failures.items() if n not in f2p]
    if other and not any(n in res.failures for n in f2p):
        return f"{other[0][0]}: {_last(other[0][1])}"
    if not res.complete:
        return "the test run did not finish: " + (res.stopped or f"exit status {res.exit_code}; " + res.output[-200:])
    return vis.failures[0].message if vis.failures else "pass-to-pass broke"


def _last(text: str, n: int = 4) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[:300]


def load_environment(max_turns: int = 8, repo_tasks: str | None = None, **_options) -> RepoFixEnv:
    path = Path(repo_tasks or os.environ.get("EVOLVE_REPO_TASKS") or DEFAULT_TASKS)
    return RepoFixEnv(path, max_turns=max_turns)
