"""Issue #11, classes 3 (forged or smuggled results) and 5 (parent-side crashes and blow-ups).

Same shape as test_attack_classes.py: controls before and after the attackers in one batch.
"""

from __future__ import annotations

import resource
import time

import attackers as A
import pytest
from conftest import ADD, REPO

from evolve.verification import Task, TestCase, Verifier, load_pipeline
from evolve.verification.pipeline import StageConfig
from evolve.verification.sandbox_output import Reply, loaded, safe_parse_reply
from evolve.verification.stages.base import StageContext
from evolve.verification.stages.perf import PerfStage

_hold = A.hold_controls


# -- 3 ---------------------------------------------------------------------------------------------
def test_3_codec_markers_and_forged_lines_never_pass(verifier):
    seq = [A.GOOD, A.BAD, *[x for a in A.FORGED.values() for x in (a, A.GOOD)], A.GOOD, A.BAD]
    rs = verifier.verify_batch([(ADD, s) for s in seq])
    hits = _hold(seq, rs)
    assert len(hits) == len(A.FORGED) and not any(r.passed for r in hits)
    marker = rs[seq.index(A.FORGED["codec marker tuple"])]
    assert "got ('\\x00int', '0x3')" in marker.trace, marker.trace  # read back as exactly what it returned
    tag = rs[seq.index(A.FORGED["tag-shaped dict"])]
    assert "got {'h': '0x3'}" in tag.trace, tag.trace
    verdict = rs[seq.index(A.FORGED["forged check verdict"])]
    assert "hack: forged-result" in verdict.hack_flags  # a check verdict in a candidate's own job


def test_3_timings_come_from_outside_and_lint_ignores_noqa():
    task = Task("add", "def add(a, b):\n", "add", hidden_tests=(TestCase((1, 2), 3), TestCase((5, 5), 10)),
                canonical_solution="    return a + b\n")
    with Verifier(load_pipeline(REPO / "verifiers" / "strict.toml"), jobs=2) as v:
        seq = [A.GOOD, A.SLOW, A.SLOW_FORGED_TIME, A.NOQA, A.GOOD]
        rs = v.verify_batch([(task, s) for s in seq])
    stage = [{s.name: s for s in r.stages} for r in rs]
    assert rs[0].passed and rs[-1].passed and stage[0]["perf"].passed and stage[0]["lint"].passed
    assert not stage[1]["perf"].passed and stage[1]["perf"].error_class == "TooSlow", stage[1]["perf"].trace
    assert "hack: forged-result" in rs[2].hack_flags and not rs[2].passed and rs[2].reward == 0.0
    lint = stage[3]["lint"]
    assert not lint.passed and {f.error_type for f in lint.failures} == {"F401"}, lint.trace


@pytest.mark.parametrize("mine,base", [(-5.0, 0.001), (0.0, 0.0), (0.0, -1.0), (1e300, 0.0)])
def test_3_odd_times_cannot_crash_the_perf_stage(mine, base):
    ctx = StageContext(ADD, "", "", Reply(time_s=mine), load_pipeline(None), (), (), "", base)
    r = PerfStage().run(ctx, StageConfig(name="perf", options={"slack": 3.0}))
    assert 0.0 <= r.score <= 1.0


WEAK = {  # the 6 HumanEval tasks whose check cannot be rewritten: helper redefinition, patching, frames
    "HumanEval/32": ["def poly(xs, x):\n    return 0.0\ndef find_zero(xs):\n    return 0.0\n",
                     "import math\nmath.fabs = lambda x: 0.0\ndef find_zero(xs):\n    return 0.0\n"],
    "HumanEval/33": ["def sort_third(l):\n    return list(l)\n"],
    "HumanEval/38": ["def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n"],
    "HumanEval/50": ["def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n"],
    "HumanEval/53": ["import random\nrandom.randint = lambda a, b: 1\ndef add(x, y):\n    return 2 if x == y == 1 else x + y + (x > 40)\n"],
    "HumanEval/151": ["import sys\ndef double_the_difference(lst):\n    return sys._getframe(1).f_locals.get('odd_sum', 0)\n",
                      "def double_the_difference(lst):\n    try:\n        raise ValueError\n    except ValueError as e:\n"
                      "        f = e.__traceback__.tb_frame\n    while f:\n        if 'odd_sum' in f.f_locals:\n"
                      "            return f.f_locals['odd_sum']\n        f = f.f_back\n    return 0\n"],
}


def test_3_unrewritable_humaneval_checks_cannot_be_fooled(he_verifier, humaneval):
    by_id = {t.task_id: t for t in humaneval}
    pairs, kinds = [], []
    for tid, attacks in WEAK.items():
        t = by_id[tid]
        wrong = "    return None\n"
        for src, kind in ([(t.canonical_solution, "gold"), (wrong, "wrong")] + [(a, "attack") for a in attacks]
                          + [(t.canonical_solution, "gold"), (wrong, "wrong")]):
            pairs.append((t, src))
            kinds.append(kind)
    rs = he_verifier.verify_batch(pairs)
    for (t, _), kind, r in zip(pairs, kinds, rs, strict=True):
        assert r.passed == (kind == "gold"), (t.task_id, kind, r.trace)
        assert not r.weak_verification


# -- 5 ---------------------------------------------------------------------------------------------
# Float tolerances only: every hostile value reaches the parent's arithmetic comparison.
CLOSE = Task("addc", "def add(a, b):\n", "add",
             hidden_tests=(TestCase((1.5, 2.0), 3.5, "close", 1e-6), TestCase((0.5, 0.25), 0.75, "isclose", 1e-9)))


def test_5_no_result_can_crash_or_bloat_the_parent(verifier):
    seq = [A.GOOD, A.BAD, *[x for a in A.BLOWUPS.values() for x in (a, A.GOOD)], A.GOOD, A.BAD]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    rs = verifier.verify_batch([(CLOSE, s) for s in seq])
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    hits = _hold(seq, rs)
    assert len(hits) == len(A.BLOWUPS) and not any(r.passed for r in hits)
    for r in hits:
        assert r.trace and len(r.trace) <= 1000 and r.error_class, r
    assert grew_mb < 200, grew_mb  # the parent never holds more than the per-job result cap
    assert time.monotonic() - t0 < 120
    big = rs[seq.index(A.BLOWUPS["[0]*4_000_000"])]
    assert big.error_class == "OutputLimit" and "over the size limit" in big.trace, big.trace
    assert rs[seq.index(A.BLOWUPS["10**400"])].error_class == "WrongAnswer"  # OverflowError in the comparison
    junk = rs[seq.index(A.BLOWUPS["junk on the result fd"])]
    assert "OutputLimit: results too large" in junk.trace, junk.trace


HOSTILE_REPLIES = [
    {"lines": ["R 0 ok " + "[" * 100000 + "]" * 100000, "END"]},
    {"lines": ["R 0 ok {\"h\": 12}", "R 1 ok {\"t\": 1}", "R 2 ok {\"d\": [[[1], 2]]}", "END"]},
    {"lines": ["R 0 ok 1" + "0" * 5000, "R 1 ok NaN", "R 2 err [1, 2]", "END"]},
    {"lines": ["R 5 ok 1", "END"]},
    {"lines": ["L err " + "x" * 10**6, "C err {}", "W ok", "A 1", "T -1", "END", "END"]},
    {"lines": None, "flags": 7, "cpu_s": -3},
    {"lines": [b"bytes"], "out": None},
    "not a dict",
]


@pytest.mark.parametrize("raw", HOSTILE_REPLIES, ids=range(len(HOSTILE_REPLIES)))
def test_5_hostile_replies_parse_to_failures_never_exceptions(raw):
    r = safe_parse_reply(raw, 3)
    outs = [loaded(o) for o in r.results]  # values are decoded when judged (one sample at a time)
    assert len(outs) == 3 and not all(o.status == "ok" for o in outs)
