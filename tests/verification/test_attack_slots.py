"""Issue #24, the slot machinery and the limits: no job can poison its slot for the next one, be
counted as finished while it runs, pass after a kill, hide its CPU time, or hold resources the
rlimits do not count; strict types hold on every comparison path. Controls before and after.
"""

from __future__ import annotations

import re
import time
import tomllib

import attackers as A
import attackers3 as X
import pytest
from conftest import ADD

from evolve.verification import Task, TestCase, Verifier
from evolve.verification.pipeline import DEFAULT_TOML, pipeline_from_dict
from evolve.verification.sandbox.codec import NonPlain, encode
from evolve.verification.sandbox.jobenv import _per_ns_pid_max

# A correct answer of 300 kB: more than a pipe holds, so writing it needs a blocking, default pipe.
BIG = Task("big", "def big(n):\n", "big", visible_tests=(TestCase((300_000,), "x" * 300_000),),
           hidden_tests=(TestCase((70_000,), "x" * 70_000),), canonical_solution="    return 'x' * n\n")
BIG_GOOD = "def big(n):\n    print('p' * 200_000)\n    return 'x' * n\n"
BIG_BAD = "def big(n):\n    return 'y' * n\n"


def _pipeline(**limits):
    d = tomllib.loads(DEFAULT_TOML)
    d["limits"] = {"timeout_s": 3.0, "cpu_s": 2.0, "memory_mb": 512, **limits}
    return pipeline_from_dict(d, "<test>")


def _hold(seq, rs):
    others = []
    for src, r in zip(seq, rs, strict=True):
        if src in (A.GOOD, BIG_GOOD):
            assert r.passed, r.trace
        elif src in (A.BAD, BIG_BAD):
            assert not r.passed and r.error_class == "WrongAnswer", r.trace
        else:
            others.append(r)
    return others


# -- 3. slots --------------------------------------------------------------------------------------
def test_3_a_job_cannot_poison_its_slots_pipes_for_the_next_job(verifier):
    # Every slot (3 per concurrent job) runs a saboteur, then a big correct answer, several times over.
    sabotage = [X.POISON_PIPES.replace("def add(a, b)", "def big(a, b=0)"),
                X.FIONBIO.replace("def add(a, b)", "def big(a, b=0)")]
    seq = [BIG_GOOD, BIG_BAD]
    for _ in range(4):
        for s in sabotage:
            seq += [s] * 3 + [BIG_GOOD] * 3
    seq += [BIG_GOOD, BIG_BAD]
    rs = verifier.verify_batch([(BIG, s) for s in seq])
    hits = _hold(seq, rs)
    assert len(hits) == 24 and not any(r.passed for r in hits)
    done = rs[seq.index(sabotage[0])]
    assert "nonblock:1" in done.trace and "shrink:3" in done.trace, done.trace  # it did change them


def test_3_flooding_jobs_never_fail_other_samples(verifier):
    seq = [A.GOOD, A.BAD]
    for _ in range(8):
        seq += [X.FLOOD, X.RESULT_FLOOD, A.GOOD]
    seq += [A.GOOD, A.BAD]
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    hits = _hold(seq, rs)  # no "the sandbox server died or hung twice" on any GOOD
    assert len(hits) == 16 and all("OutputLimit" in r.trace and not r.passed for r in hits), [r.trace for r in hits]


def test_3_a_look_alike_end_marker_does_not_let_more_jobs_run_at_once():
    with Verifier(None, jobs=2) as v:
        v.verify_batch([(ADD, A.GOOD)])  # started
        seq = [A.GOOD, A.BAD, *[X.FAKE_END, X.FAKE_END_NONCE] * 4, A.GOOD, A.BAD]
        t0 = time.monotonic()
        rs = v.verify_batch([(ADD, s) for s in seq])
        wall = time.monotonic() - t0
    hits = _hold(seq, rs)
    assert not any(r.passed for r in hits), [r.trace for r in hits]
    assert wall >= 8 * 0.6 / 2 * 0.92, wall  # 8 jobs of 0.6 s, never more than 2 at a time (half with the bug)


# -- 4. kills --------------------------------------------------------------------------------------
def test_4_no_kill_or_signal_death_passes_even_after_correct_results():
    with Verifier(_pipeline(timeout_s=1.5, cpu_s=1.0), jobs=2) as v:
        attacks = list(X.KILLED_AFTER_RESULTS.values())
        seq = [A.GOOD, A.BAD, *[x for a in attacks for x in (a, A.GOOD)], A.GOOD, A.BAD]
        rs = v.verify_batch([(ADD, s) for s in seq])
    hits = _hold(seq, rs)
    assert len(hits) == len(attacks)
    for name, r in zip(X.KILLED_AFTER_RESULTS, hits, strict=True):
        assert not r.passed and r.reward < 1.0, (name, r.trace)
    kinds = dict(zip(X.KILLED_AFTER_RESULTS, (r.error_class for r in hits), strict=True))
    traces = dict(zip(X.KILLED_AFTER_RESULTS, (r.trace for r in hits), strict=True))
    assert "OutputLimit" in traces["floods after END"] and kinds["segfault after END"] == "Crash", traces
    assert kinds["CPU limit after END"] == "Timeout" and kinds["sleeps past the timeout after END"] == "Timeout"


def test_4_a_death_after_the_last_result_fails_with_or_without_the_sentinel():
    """Issue #39: every result delivered, then flooded, segfaulted, exited non-zero or hung, before END:
    failed, nothing it sent counted. A death in the last call fails on that call, the rest kept."""
    after, before = X.KILLED_BEFORE_END, X.KILLED_BEFORE_LAST_RESULT
    with Verifier(_pipeline(timeout_s=1.5, cpu_s=1.0), jobs=2) as v:
        attacks = [*after.values(), *before.values()]
        seq = [A.GOOD, A.BAD, *[x for a in attacks for x in (a, A.GOOD)], A.GOOD, A.BAD]
        rs = v.verify_batch([(ADD, s) for s in seq])
    hits = dict(zip([*after, *before], _hold(seq, rs), strict=True))
    assert not any(r.passed for r in hits.values()), {k: r.trace for k, r in hits.items()}
    kinds = {k: r.error_class for k, r in hits.items()}
    assert [kinds[k] for k in after] == ["OutputLimit", "Crash", "Crash", "Timeout"], kinds
    for k in after:  # nothing counted: not even the visible test it "answered"
        assert hits[k].trace.startswith("visible test 1/1 failed") and hits[k].reward <= 0.1 + 1e-9, hits[k].trace
    for k, why in zip(before, ("Crash: killed by signal 11", "OutputLimit"), strict=True):
        r = hits[k]  # the visible test and two hidden ones were delivered: kept, the last call fails
        assert r.trace.startswith(f"hidden test 3/3 failed: {why}") and "at add(10, 20)" in r.trace, r.trace
        assert 0.1 + 0.3 < r.reward < 1.0, (k, r.reward)


def _perf_ms(r) -> float:
    perf = {s.name: s for s in r.stages}["perf"]
    return float(re.search(r"\(([\d.]+) ms vs", perf.trace).group(1))


def test_4_cpu_time_survives_a_kill_so_the_perf_stage_sees_it():
    d = tomllib.loads(DEFAULT_TOML)
    d["limits"] = {"timeout_s": 4.0, "cpu_s": 10.0, "memory_mb": 512}
    d["stages"].append({"name": "perf", "weight": 0.1, "required": False, "slack": 3.0})
    with Verifier(pipeline_from_dict(d, "<test>"), jobs=2) as v:
        seq = [A.GOOD, A.BAD, X.BURN_THEN_HANG, A.GOOD, X.BURN_IN_THREAD, A.GOOD, A.BAD]
        rs = v.verify_batch([(ADD, s) for s in seq])
    hits = _hold(seq, rs)
    for r in hits:
        assert not r.passed and r.error_class == "Timeout", r.trace
        assert _perf_ms(r) >= 450, r.stages  # the half second of CPU it burnt before the kill (0 before)
        assert not {s.name: s for s in r.stages}["perf"].passed


# -- 5. limits -------------------------------------------------------------------------------------
def test_5_threads_and_memfd_memory_are_limited_per_job(verifier):
    seq = [A.GOOD, A.BAD, X.THREADS, A.GOOD, X.MEMFD, A.GOOD, X.MEMFD_RAW, A.GOOD, A.BAD]
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    hits = _hold(seq, rs)
    threads, memfd, raw = (r.failures[0].got_repr for r in hits)
    assert memfd.startswith("(0, 1)"), memfd  # EPERM at the first memfd_create (630 MiB held before)
    assert raw.startswith("[-1, -1]"), raw
    if not _per_ns_pid_max():
        pytest.skip("per-namespace pid_max needs Linux 6.14: no per-job task limit on this kernel")
    assert 50 <= int(threads) < 301, threads  # the job's pid namespace holds at most ~300 tasks (2,500 before)
    assert verifier.sandbox._proc.hello.get("tasks_max") == 301


# -- 6. types --------------------------------------------------------------------------------------
SORT = Task("sort", "def srt(xs):\n", "srt", check_code="def check(candidate):\n"
            "    assert sorted(candidate([3, 1, 2])) == [1, 2, 3]\n    assert list(candidate([2, 1])) == [1, 2]\n",
            canonical_solution="    return sorted(xs)\n")
SORT_REPLAY = Task("sortr", "def srt(xs):\n", "srt", check_code="import random\ndef check(candidate):\n"
                   "    for _ in range(5):\n        x = [random.randint(0, 9) for _ in range(4)]\n"
                   "        assert list(candidate(x)) == sorted(x)\n", canonical_solution="    return sorted(xs)\n")
S_GOOD, S_BAD = "def srt(xs):\n    return sorted(xs)\n", "def srt(xs):\n    return list(xs)\n"
S_TUPLE = "def srt(xs):\n    return tuple(sorted(xs))\n"


def test_6_strict_types_hold_through_transforms_and_replayed_checks():
    for strict in (True, False):
        d = tomllib.loads(DEFAULT_TOML)
        d["strict_types"] = strict
        with Verifier(pipeline_from_dict(d, "<test>"), jobs=2) as v:
            for task in (SORT, SORT_REPLAY):
                seq = [S_GOOD, S_BAD, S_TUPLE, S_GOOD, S_BAD]
                rs = v.verify_batch([(task, s) for s in seq])
                assert [r.passed for r in rs] == [True, False, not strict, True, False], \
                    (task.task_id, strict, [r.trace for r in rs])
                if strict and task is SORT:
                    assert rs[2].error_class == "TypeMismatch", rs[2].trace


def test_6_type_tests_are_by_identity_never_a_metaclass_eq(verifier):
    seq = [A.GOOD, A.BAD, X.METACLASS_LIST, A.GOOD, A.BAD]
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    (hit,) = _hold(seq, rs)
    assert not hit.passed and "hack: non-plain-return" in hit.hack_flags, hit.trace
    ns: dict = {}
    exec(X.METACLASS_LIST, ns)  # noqa: S102 - the attacker's own class, here only to feed the encoder
    try:
        encode(ns["add"](1, 2))
        raise AssertionError("encoded a metaclass impostor")
    except NonPlain:
        pass
