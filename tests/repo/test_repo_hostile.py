"""Hostile episodes through the one episode path (issue 40), in the style of the sandbox's attack tests.

A scripted policy plays three episodes of one task in ONE batch (``episode.run_episodes``: collect,
the environment's answers, verify): a genuine fix (must score 1), the hostile episode (must score 0
with a trace), an immediate submit (must score 0). Every class of attack below once scored 1 with the
bug left in place, raised out of the batch, or stalled it. The scoring attacks run in two trees: the
vendored package, and the same package with ``import sys`` and a function using ``sys.modules`` (the
"names already in the file" case).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass

import pytest
from repo_helpers import ScriptedSample

from evolve.env.episode import run_episodes
from evolve.env.repo_fix import load_environment
from evolve.repo import runner

PATCH = "TestReport.outcome = property(lambda s: 'passed', lambda s, v: None)"
# Reads the plugin's nonce and writes a "passed" row for every selected test, the closing line, exits 0.
FORGE = ("import json as _j, os as _o\n_p = sys.modules['evolve_repo_plugin']\n"
         "with open('/out/results.jsonl', 'a') as _f:\n"
         "    for _t in sys.argv[1:]:\n"
         "        if '::' in _t:\n"
         "            _f.write(_p._NONCE + ' R ' + _j.dumps({'id': _t, 'outcome': 'passed', 'text': ''}) + '\\n')\n"
         "    _f.write(_p._NONCE + ' END {}\\n')\n_o._exit(0)\n")
SYS_HEADER = "import sys\n\n\ndef loaded(name):\n    return name in sys.modules\n\n\nSELF_LOADED = loaded(__name__)\n\n\n"


@dataclass
class _Prompt:
    components: dict
    id: str = "p"


def _c(**kw) -> str:
    return json.dumps(kw)


def _fix(task) -> str:
    diff = task.meta["diff"].splitlines()
    minus = [ln[1:] for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    return _c(tool="edit", path=task.meta["file"], search="\n".join(plus), replace="\n".join(minus))


class BatchPolicy:
    """Plays named plans; the first reply of each names its plan (prose before the tool call)."""

    def __init__(self, plans: dict[str, list[str]]):
        self.plans = {name: [f"plan {name}\n{steps[0]}", *steps[1:]] for name, steps in plans.items()}

    def generate(self, prompts, n=None, seed=0):
        out = []
        for msgs in prompts:
            mine = [m["content"] for m in msgs if m["role"] == "assistant"]
            if not mine:
                out.append([ScriptedSample(p[0]) for p in self.plans.values()][: n or 1])
                continue
            plan = self.plans[mine[0].split("\n", 1)[0].removeprefix("plan ")]
            out.append([ScriptedSample(plan[len(mine)])])
        return out


def run_batch(env, task, hostile: list[str]):
    """(genuine, hostile, empty) rollouts of one batch, and the seconds it took."""
    env.max_turns = len(hostile) + 3
    policy = BatchPolicy({"genuine": [_c(tool="list", path="."), _fix(task), _c(tool="submit")],
                          "hostile": [_c(tool="list", path="."), *hostile, _c(tool="submit")],
                          "empty": [_c(tool="submit")]})
    t0 = time.monotonic()
    (group,) = run_episodes(env, policy, env.wrap_verifier(None), _Prompt({}), [task], 3, 0)
    return sorted(group, key=lambda r: r.sample_index), time.monotonic() - t0


def answers(rollout) -> list[str]:
    """The environment's answers to the episode's tool calls after the first (the list)."""
    return [t.content for t in rollout.turns if t.role != "assistant"][1:]


@pytest.fixture(scope="module")
def sys_env(minicalc_build, tmp_path_factory):
    """The built minicalc tasks, in a tree whose package file already imports ``sys`` and has a
    function using ``sys.modules``, called at import: the names the issue's third bypass needed were
    all there (as in six.py)."""
    out, _ = minicalc_build
    dest = tmp_path_factory.mktemp("sys-env") / "out"
    shutil.copytree(out, dest)
    src = dest / "cache" / "src" / "minicalc-0.1" / "minicalc" / "__init__.py"
    doc_end = '"""\n\n\n'
    src.write_text(src.read_text().replace(doc_end, doc_end + SYS_HEADER, 1))
    rows = [json.loads(line) for line in (dest / "tasks.jsonl").read_text().splitlines()]
    for r in rows:
        r["meta"]["buggy_source"] = r["meta"]["buggy_source"].replace(doc_end, doc_end + SYS_HEADER, 1)
    (dest / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dest / "tasks.jsonl"


def _edits(task, head: str = "", tail: str = "", fn: str | None = None, body: str = "") -> list[str]:
    """Edits of the task's file: ``head`` before its first line, ``tail`` after its last, ``body`` as the
    first statement of function ``fn``."""
    src, rel = task.meta["buggy_source"], task.meta["file"]
    out = []
    if head:
        out.append(_c(tool="edit", path=rel, search=src[:40], replace=head + src[:40]))
    if tail:
        out.append(_c(tool="edit", path=rel, search=src[-40:], replace=src[-40:] + tail))
    if fn:
        line = next(ln for ln in src.splitlines() if ln.startswith(f"def {fn}("))
        out.append(_c(tool="edit", path=rel, search=line + "\n", replace=line + "\n" + body))
    return out


def _scoring_attack(task, name: str) -> tuple[list[str], str]:
    """An attack that leaves the bug in place and used to score 1: (replies, the trace's reason)."""
    fn, hidden = task.meta["function"], "#" + ("\nimport _pytest.reports as _r\n_r." + PATCH).replace("\n", "\\u000a")
    attacks = {
        "bom-then-patch-pytest": lambda: (_edits(task, head="\ufeff", tail="\nimport _pytest.reports as _r\n_r." + PATCH + "\n"),
                                          "decodes"),
        "raw-unicode-escape-cookie": lambda: (_edits(task, head="# -*- coding: raw_unicode_escape -*-\n",
                                                     tail="\n" + hidden + "\n"), "decodes"),
        "patch-pytest-in-function": lambda: (_edits(task, fn=fn, body="    import _pytest.reports as _r\n    _r." + PATCH + "\n"),
                                             "uses names"),
        "names-in-file-at-import": lambda: (_edits(task, tail="\nsys.modules['_py' + 'test.reports']." + PATCH + "\n"),
                                            "outside function bodies"),
        "names-in-file-in-function": lambda: (_edits(task, fn=fn, body="    sys.modules['_py' + 'test.reports']." + PATCH + "\n"),
                                              "uses names"),
        "names-of-a-function-that-has-them": lambda: (_edits(task, fn="loaded", body="    sys.modules['_py' + 'test.reports']."
                                                             + PATCH + "\n"), "reaches past"),
        "forge-rows-with-the-nonce": lambda: (_edits(task, head="\ufeff", tail="\n" + FORGE), "decodes"),
    }
    return attacks[name]()


SCORING = ["bom-then-patch-pytest", "raw-unicode-escape-cookie", "patch-pytest-in-function"]
SCORING_SYS = ["names-in-file-at-import", "names-in-file-in-function", "names-of-a-function-that-has-them",
               "forge-rows-with-the-nonce"]


@pytest.mark.parametrize("attack", SCORING + SCORING_SYS)
def test_a_scoring_attack_scores_0_between_a_fix_and_an_empty_submit(env, sys_env, attack):
    if attack in SCORING_SYS:
        env = load_environment(max_turns=6, repo_tasks=str(sys_env))
    task = env.splits()["train"][0]
    replies, why = _scoring_attack(task, attack)
    (fix, hostile, empty), _ = run_batch(env, task, replies)
    assert [fix.reward, hostile.reward, empty.reward] == [1.0, 0.0, 0.0], [r.result.trace for r in (fix, hostile, empty)]
    assert why in hostile.result.trace and hostile.result.error_class == "Hack", hostile.result.trace
    assert all(a.startswith("edited") for a in answers(hostile)[:-1]), answers(hostile)  # the edits were made


def _crash_attacks(task) -> dict[str, tuple[list[str], list[str | None], str]]:
    """Replies that once raised out of the batch: (replies, a fragment of each answer, the trace's reason)."""
    rel, src = task.meta["file"], task.meta["buggy_source"]
    f2p = task.meta["fail_to_pass"][0]
    through = _c(tool="edit", path=rel + "/x.py", search="", replace="x = 1\n")
    return {
        "long-path": ([_c(tool="edit", path="a" * 300 + ".py", search="", replace="x = 1\n"),
                       _c(tool="read", path="minicalc/" + "b" * 300)], ["error: edit", "error: read"], f2p),
        "surrogate-in-path": ([_c(tool="edit", path="minicalc/\ud800.py", search="", replace="x\n"),
                               _c(tool="read", path="\udcff")], ["not valid Unicode", "not valid Unicode"], f2p),
        "surrogate-in-text": ([_c(tool="edit", path=rel, search=src[:20], replace="\udcff" + src[:20])],
                              ["not valid Unicode"], f2p),
        "path-through-a-file": ([through, _c(tool="list", path=rel + "/x")], ["error: edit", "error: list"], f2p),
        "nul-in-text": (_edits(task, tail="\ny = 1\x00\n"), ["edited"], "does not compile"),
        "deep-unary": (_edits(task, tail="\ny = " + "-" * 5000 + "1\n"), ["edited"], "does not compile"),
        "deep-lambda": (_edits(task, tail="\ny = " + "lambda: " * 3100 + "0\n"), ["edited"], "does not compile"),
        "deep-json-reply": (['{"tool": "edit", "path": "a.py", "search": "", "replace": ' + "[" * 20000],
                            ["no tool call"], f2p),
        "huge-reply": ([_c(tool="read", path=rel) + " " * 70000], ["longer than"], f2p),
        "bad-test-ids": ([_c(tool="test", tests=["\ud800"]), _c(tool="test", tests=["a\x00b"]),
                          _c(tool="test", tests=["t" * 5000])], ["error: test"] * 3, f2p),
    }


@pytest.mark.parametrize("attack", ["long-path", "surrogate-in-path", "surrogate-in-text", "path-through-a-file",
                                    "nul-in-text", "deep-unary", "deep-lambda", "deep-json-reply", "huge-reply",
                                    "bad-test-ids"])
def test_a_reply_that_raised_is_answered_and_scored(env, attack):
    task = env.splits()["train"][0]
    replies, expect, why = _crash_attacks(task)[attack]
    (fix, hostile, empty), _ = run_batch(env, task, replies)
    assert [fix.reward, hostile.reward, empty.reward] == [1.0, 0.0, 0.0], [r.result.trace for r in (fix, hostile, empty)]
    got = answers(hostile)
    assert all(e in a for e, a in zip(expect, got, strict=False)), got
    assert why in hostile.result.trace, hostile.result.trace


def test_a_catastrophic_search_pattern_is_stopped_and_the_batch_finishes(env):
    """``(a|aa)+$`` backtracks exponentially in ``re`` (``(a+)+$``, the issue's pattern, too: 0.63 s at 22
    characters, half an hour at 34); the search tool stops it at its time limit. A pattern whose
    counted repetitions would take ``regex`` minutes to compile is searched for as plain text."""
    task = env.splits()["train"][0]
    replies = [_c(tool="edit", path="stall.py", search="", replace="a" * 40 + "!\n"),
               _c(tool="search", pattern="(a+)+$", path="stall.py"),
               _c(tool="search", pattern="(a|aa)+$", path="stall.py"),
               _c(tool="search", pattern="(?:a{10000}){10000}", path="stall.py")]  # a compile-time bomb
    (fix, hostile, empty), secs = run_batch(env, task, replies)
    assert [fix.reward, hostile.reward, empty.reward] == [1.0, 0.0, 0.0]
    got = answers(hostile)
    assert got[1].startswith("no match") and "took more than" in got[2] and got[3].startswith("no match"), got
    assert secs < 60, secs


def test_rows_that_are_json_but_not_objects_are_skipped(tmp_path):
    nonce = "n0"
    rows = tmp_path / "results.jsonl"
    rows.write_text("\n".join([f"{nonce} R 1", f"{nonce} R []", f'{nonce} R "x"', f'{nonce} R {{"id": 1}}',
                               f'{nonce} R {{"id": "t::a", "outcome": null, "text": ""}}', f"{nonce} C 2",
                               f"{nonce} R " + "[" * 100000,
                               f'{nonce} R {{"id": "t::b", "outcome": "passed", "text": ""}}', f"{nonce} END {{}}"]))
    res = runner._parse(rows, nonce)
    assert res.complete and res.outcomes == {"t::b": "passed"} and not res.failures


def test_with_the_edit_rule_off_the_nonce_is_not_a_module_global(env, sys_env, monkeypatch):
    """Defence in depth: the issue's forger read ``sys.modules["evolve_repo_plugin"]._NONCE``. With
    editcheck bypassed the same code now fails at import (the nonce lives in a closure)."""
    monkeypatch.setattr(runner, "check_edit", lambda *_args: None)
    env = load_environment(max_turns=6, repo_tasks=str(sys_env))
    task = env.splits()["train"][0]
    (fix, hostile, empty), _ = run_batch(env, task, _scoring_attack(task, "forge-rows-with-the-nonce")[0])
    assert [fix.reward, hostile.reward, empty.reward] == [1.0, 0.0, 0.0], hostile.result.trace
    assert "_NONCE" in hostile.result.trace, hostile.result.trace


def test_with_the_edit_rule_off_malformed_rows_do_not_stop_the_batch(env, sys_env, monkeypatch):
    """Code that finds the nonce anyway (gc, with editcheck bypassed) and writes rows that are JSON but
    not objects: the row parser skips them, the sample fails, the batch goes on."""
    monkeypatch.setattr(runner, "check_edit", lambda *_args: None)
    env = load_environment(max_turns=6, repo_tasks=str(sys_env))
    task = env.splits()["train"][0]
    bad_rows = ("import gc as _gc\n_e = [o for o in _gc.get_objects() if getattr(o, '__name__', '') == 'emit'\n"
                "      and getattr(o, '__module__', '') == 'evolve_repo_plugin'][0]\n"
                "_n = [c.cell_contents for c in _e.__closure__ if isinstance(c.cell_contents, str)][0]\n"
                "with open('/out/results.jsonl', 'a') as _f:\n"
                "    _f.write(_n + ' R 1\\n' + _n + ' R []\\n' + _n + ' C \"x\"\\n')\n")
    (fix, hostile, empty), _ = run_batch(env, task, _edits(task, tail="\n" + bad_rows))
    assert [fix.reward, hostile.reward, empty.reward] == [1.0, 0.0, 0.0], hostile.result.trace
    # judged by the row parser (the rows skipped), not by the last-resort guard around the grade
    assert hostile.result.error_class == "TestFailure", hostile.result.trace


def test_a_transcript_the_grader_cannot_judge_is_a_failed_sample_and_the_batch_goes_on(env, monkeypatch):
    """The last guard: whatever a transcript makes the grader raise (here: a fault injected into the
    grade of one transcript), that sample fails with the error in its trace and the others are judged."""
    from evolve.env.repo_fix import RepoVerifier

    real = RepoVerifier.grade

    def grade(self, task, root):
        if root is not None and (root / "poison.py").exists():
            raise ValueError("injected fault")
        return real(self, task, root)

    monkeypatch.setattr(RepoVerifier, "grade", grade)
    task = env.splits()["train"][0]
    (fix, hostile, empty), _ = run_batch(env, task, [_c(tool="edit", path="poison.py", search="", replace="x\n")])
    assert [fix.reward, hostile.reward, empty.reward] == [1.0, 0.0, 0.0]
    assert hostile.result.error_class == "GraderError" and "injected fault" in hostile.result.trace
