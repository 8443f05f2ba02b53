"""Issue #24, hostile text: nothing a sample's text or results hold can crash, stall or bloat the
trusted parent, or forge a line of the CLI's output. Every batch has controls before and after.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import attackers as A
import attackers3 as X
import pytest
from conftest import ADD, REPO

from evolve.verification import Task, TestCase, Verifier, load_pipeline
from evolve.verification.model_reply import extract, fenced_blocks
from evolve.verification.reply_verifier import ReplyVerifier
from evolve.verification.sandbox.codec import decode
from evolve.verification.tasks import assemble_program, strip_fences

EVOLVE = str(Path(sys.executable).with_name("evolve"))


_hold = A.hold_controls


def _sandwich(attacks):
    seq = [A.GOOD, A.BAD]
    for a in attacks:
        seq += [a, A.GOOD]
    return seq + [A.GOOD, A.BAD]


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- 1. parser crashes -----------------------------------------------------------------------------
def test_1_no_completion_text_crashes_the_batch(verifier):
    good = list(X.GOOD_IN_HOSTILE_TEXT.values())
    seq = _sandwich([*X.PARSER.values(), X.FORGED_SUMMARY, *good])
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    hits = _hold(seq, rs)
    assert len(hits) == len(X.PARSER) + 1 + len(good)
    assert [r.passed for r in hits] == [False] * (len(X.PARSER) + 1) + [True] * len(good), [r.trace for r in hits]
    for r in hits:
        assert r.trace and (r.passed or r.error_class) and len(r.trace) <= 1000, r
        assert r.error_class != "VerifierError", r.trace  # read by the parsers, not caught by the backstop
        json.dumps(r.to_dict())  # storable as JSON (surrogates escaped)


def test_1_the_parsers_themselves_never_raise_on_model_text():
    chat = Task(**{**ADD.__dict__, "meta": {"reply_format": "chat"}})
    for name, text in {**X.PARSER, **X.GOOD_IN_HOSTILE_TEXT}.items():
        assemble_program(ADD, text)
        assemble_program(ADD, "```python\n" + text + "\n```")
        extract(text, chat.entry_point)
        extract("```python\n" + text + "\n```", chat.entry_point), name


def test_1_an_over_long_completion_is_refused_unparsed_and_recorded(verifier):
    before = _maxrss_mb()
    seq = [A.GOOD, A.BAD, X.HUGE, A.GOOD, X.HUGE * 3, A.GOOD, A.BAD]
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    grew = _maxrss_mb() - before
    hits = _hold(seq, rs)
    cap = verifier.pipeline.limits.max_completion_chars
    assert cap == 131072
    for r in hits:
        assert not r.passed and r.error_class == "CompletionTooLong", r.trace
        assert f"over the cap of {cap}" in r.trace
    assert grew < 100, grew  # 1.7 GB before: the parser ran on 2.8 MB


def test_1_chat_replies_never_crash_the_chat_verifier(verifier):
    chat = Task(**{**ADD.__dict__, "meta": {"reply_format": "chat"}})
    fence = "```python\n{}\n```"
    replies = [fence.format(A.GOOD), fence.format(A.BAD), *X.PARSER.values(), fence.format(X.PARSER["NUL byte"]),
               "Here:\n" + fence.format("def add(a, b):\n    return " + "(" * 50_000 + "1" + ")" * 50_000),
               X.HUGE, fence.format(A.GOOD), fence.format(A.BAD)]
    rs = ReplyVerifier(verifier).verify_batch([(chat, t) for t in replies])
    assert rs[0].passed and rs[-2].passed, (rs[0].trace, rs[-2].trace)
    assert not rs[1].passed and not rs[-1].passed
    assert not any(r.passed for r in rs[2:-2])
    assert rs[-3].error_class == "CompletionTooLong"


def test_1_and_2_the_cli_prints_model_text_on_one_line_and_cannot_be_forged(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "add", "prompt": "def add(a, b):\n", "entry_point": "add",
                                 "hidden_tests": [{"inputs": [1, 2], "expected": 3}]}) + "\n")
    comps = [A.GOOD, X.FORGED_SUMMARY, X.PRINT_SUMMARY, X.PARSER["lone surrogate in code"], A.GOOD,
             "def add(a, b):\n    raise KeyError('\\udcff\\n' * 3)\n"]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": "add", "completion": c}) + "\n" for c in comps))
    p = subprocess.run([EVOLVE, "verify", "--tasks", str(tasks), "--samples", str(samples), "--out",
                        str(tmp_path / "out.jsonl")], capture_output=True, timeout=120)
    out = p.stdout.decode("utf-8")  # valid UTF-8: no raw surrogate reached the terminal
    assert p.returncode == 1, p.stderr[-2000:]
    assert b"Traceback" not in p.stderr, p.stderr[-2000:]
    lines = out.splitlines()
    assert lines[-1] == "2 passed, 4 failed", out
    summaries = [line for line in lines if re.match(r"\s*(\x1b\[2K)?\d+ passed, \d+ failed", line)]
    assert summaries == ["2 passed, 4 failed"], out  # the forged ones stay inside their FAIL lines
    assert "999 passed, 0 failed" in out  # ... where they are shown, escaped
    assert all(line.startswith("FAIL add (line ") for line in lines[:-1]), out
    assert "\x1b" not in out and "\r" not in out
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 6


# -- 3. stalls -------------------------------------------------------------------------------------
def test_3_fence_parsing_is_linear_in_both_reply_parsers():
    for name, text in X.stall_texts(200_000).items():
        t0 = time.process_time()
        strip_fences(text)
        fenced_blocks(text)
        extract(text, "add")
        assert time.process_time() - t0 < 2.0, name  # ~50 s for one crafted reply before


def test_3_stalling_replies_in_a_batch_keep_their_verdicts(verifier):
    texts = list(X.stall_texts(60_000).values())
    seq = _sandwich(texts)
    t0 = time.process_time()
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    assert time.process_time() - t0 < 10
    _hold(seq, rs)


def test_3_hash_colliding_results_cost_the_parent_no_time(verifier):
    attacks = [X.HASH_COLLIDING_SET, X.HASH_COLLIDING_DICT, X.WIDE_OBJECT]
    seq = _sandwich(attacks)
    t0 = time.process_time()
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    spent = time.process_time() - t0
    hits = _hold(seq, rs)
    assert len(hits) == 3 and not any(r.passed for r in hits)
    assert spent < 3.0, spent  # ~9 s of CPU per sample before
    assert "unreadable result" in rs[seq.index(X.HASH_COLLIDING_SET)].trace


def test_3_decode_refuses_colliding_and_oversized_hashed_containers():
    many = ",".join(str(i * X.M61) for i in range(1, 20))
    for text in ('{"s":[' + many + "]}", '{"f":[' + many + "]}", '{"d":[' + ",".join(f"[{i * X.M61},0]" for i in
                                                                                    range(1, 20)) + "]}",
                 '{"t":[1],"s":[2]}', '{"s":[[1]]}'):
        with pytest.raises(ValueError):
            decode(text)
    assert decode('{"s":[-1,-2,' + ",".join(str(i) for i in range(1000)) + "]}") == {-2, -1, *range(1000)}


# -- 4. memory -------------------------------------------------------------------------------------
def test_4_record_replay_results_are_not_held_decoded_for_the_batch(he_verifier, humaneval):
    """48 samples of a record/replay task, each returning ~1 MiB of tiny lists (about 36x that decoded)."""
    task = next(t for t in humaneval if t.task_id == "HumanEval/53")
    fat = "def add(x, y):\n    return [[]] * 2600\n"
    gold = task.canonical_solution
    seq = [gold, "    return None\n"] + [fat] * 48 + [gold, "    return None\n"]
    before = _maxrss_mb()
    rs = he_verifier.verify_batch([(task, s) for s in seq])
    grew = _maxrss_mb() - before
    assert rs[0].passed and rs[-2].passed and not rs[1].passed and not rs[-1].passed
    assert not any(r.passed for r in rs[2:-2])
    assert grew < 250, grew  # 1.5 GB before


def test_4_a_flood_of_lint_findings_makes_a_small_result():
    task = Task("add", "def add(a, b):\n", "add", hidden_tests=(TestCase((1, 2), 3),),
                canonical_solution="    return a + b\n")
    def noisy(n):  # n undefined names in a function never called
        return "def add(a, b):\n    return a + b\ndef _never():\n" + " u\n" * n

    with Verifier(load_pipeline(REPO / "verifiers" / "strict.toml"), jobs=2) as v:
        rs = v.verify_batch([(task, A.GOOD), (task, noisy(40_000)), (task, noisy(8_000)), (task, A.GOOD)])
    assert rs[0].passed and rs[3].passed
    for r in rs[1:3]:
        lint = {s.name: s for s in r.stages}["lint"]
        assert not lint.passed and lint.score == 0.0 and "finding" in lint.trace, [(s.name, s.trace) for s in r.stages]
        assert len(lint.failures) <= 20
        assert len(json.dumps(r.to_dict())) < 64 << 10  # 8.2 MiB before
