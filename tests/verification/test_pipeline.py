"""Pipelines from TOML: validation, policies, weights, partial credit, exact types."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_errors import assert_one_line_error

from evolve.errors import ConfigError
from evolve.verification import Task, TestCase, Verifier, load_pipeline

REPO = Path(__file__).resolve().parents[2]


def test_shipped_pipelines_load():
    for name in ("default", "humaneval", "strict"):
        p = load_pipeline(REPO / "verifiers" / f"{name}.toml")
        assert p.name == name and p.stages
    strict = load_pipeline(REPO / "verifiers" / "strict.toml")
    assert strict.policy == "stop_first" and [s.name for s in strict.stages][-2:] == ["lint", "perf"]
    # The built-in default and verifiers/default.toml say the same thing.
    a, b = load_pipeline(None), load_pipeline(REPO / "verifiers" / "default.toml")
    assert (a.stages, a.policy, a.limits, a.strict_types) == (b.stages, b.policy, b.limits, b.strict_types)


H = '[[stages]]\nname = "hidden"\n'


@pytest.mark.parametrize("text,needle", [
    ('policy = "maybe"\n' + H, "policy: Input should be 'continue' or 'stop_first'"),
    ('[[stages]]\nname = "fuzz"\n', "stages.0.name: must be one of"),
    ('[[stages]]\nname = "hidden"\nweight = "x"\n', "stages.0.weight: Input should be a valid number"),
    ('stages = []\n', "stages: must be a non-empty array"),
    ('bogus = 1\n' + H, "unknown key 'bogus'"),
    ('[limits]\ntimeout_s = -1\n' + H, "limits.timeout_s: Input should be greater than or equal to 0.05"),
    ('[limits]\ncpu = 1\n' + H, "unknown key 'limits.cpu'"),
    ('[limits]\nmemory_mb = "512"\n' + H, "limits.memory_mb: Input should be a valid integer"),
    ('partial_credit = 1\n' + H, "partial_credit: Input should be a valid boolean"),
    # a stage's own keys: a misspelt one is an error, not a setting nobody reads
    (H + 'requird = false\n', "unknown key 'stages.0.requird'"),
    (H + '[[stages]]\nname = "perf"\nslak = 2.0\n', "unknown key 'stages.1.slak'"),
    (H + '[[stages]]\nname = "perf"\nslack = -1.0\n', "stages.1.slack: Input should be greater than 0"),
    (H + '[[stages]]\nname = "lint"\nselect = "F"\n', "stages.1.select: Input should be a valid tuple"),
    (H + H, "stages.1: stage 'hidden' appears twice"),
    ('[[stages]]\nname = "hidden"\nweight = 0.0\n', "stage weights sum to 0"),
    ('[[stages]\n', "not valid TOML"),
])
def test_malformed_pipeline_names_file_and_key(tmp_path, text, needle):
    msg = assert_one_line_error(load_pipeline, tmp_path / "bad.toml", text, needle)
    assert "more)" not in msg, msg


# verifier_version hashes these pipelines' stages, policy, comparison and limits (augment files record
# it): the pydantic port kept the values, and their repr, of the dataclasses it replaced.
RECORDED_VERSIONS = {
    "default": "3a55f018dd733c6000ec89471464c1d0d86cd03ecfdfbea932f9bcc3dd186145",
    "strict": "5d66cd179cc739233a085326cc4fffad9a90eb4b0d46f63eb12ba8f2ffb7a8a8",
    "humaneval": "2b06355faf0ce95ed9c3738fbc056333d63ad3aa0f9430dc29029c04bc2b6eec",
}


def test_verifier_versions_written_before_the_port_still_match(tmp_path):
    from evolve.verification.selfcheck import verifier_version

    for name, digest in RECORDED_VERSIONS.items():
        assert verifier_version(load_pipeline(REPO / "verifiers" / f"{name}.toml"), []) == digest, name
    # ints where floats are meant, a stage option as written: hashed as the old loader had them
    p = tmp_path / "ints.toml"
    p.write_text('[limits]\ntimeout_s = 6\nmemory_mb = 256\n[[stages]]\nname = "hidden"\nweight = 1\n'
                 '[[stages]]\nname = "perf"\nweight = 0\nslack = 3\n')
    assert verifier_version(load_pipeline(p), []) == "e37d47676e72d6eac6fd6f0dd44235c494cbdf1f53d50eb77ad66d6e589be6aa"


def test_missing_pipeline_file(tmp_path):
    with pytest.raises(ConfigError, match="no such pipeline file"):
        load_pipeline(tmp_path / "nope.toml")


TASK = Task("t", "def f(x):\n", "f", visible_tests=(TestCase((1,), 2),),
            hidden_tests=tuple(TestCase((i,), 2 * i) for i in range(4)), canonical_solution="    return 2 * x\n")


def test_continue_gives_feedback_from_every_stage_and_partial_credit(verifier):
    r = verifier.verify(TASK, "    return 2 * x if x < 2 else 0\n")  # visible ok, hidden 2/4
    names = [s.name for s in r.stages]
    assert names == ["compile", "visible", "hidden"]
    hidden = r.stages[2]
    assert hidden.score == 0.5 and not hidden.passed and not r.passed
    # reward = (0.1 * 1 + 0.3 * 1 + 0.6 * 0.5) / 1.0
    assert r.reward == pytest.approx(0.7)
    assert "hidden test 3/4 failed: f(2) expected 4, got 0" in r.trace
    assert len(hidden.failures) == 2 and hidden.failures[0].expected_repr == "4"


def test_stop_first_skips_later_stages(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('policy = "stop_first"\n[[stages]]\nname = "compile"\nweight = 1\n'
                 '[[stages]]\nname = "visible"\nweight = 1\n[[stages]]\nname = "hidden"\nweight = 2\n')
    with Verifier(load_pipeline(p), jobs=1) as v:
        r = v.verify(TASK, "    return 3\n")
        assert [s.skipped for s in r.stages] == [False, False, True]
        assert r.stages[2].trace.startswith("skipped") and r.reward == pytest.approx(0.25)
        assert v.verify(TASK, TASK.canonical_solution).reward == 1.0


def test_exact_types_and_python_equality(verifier):
    t = Task("half", "def half(x):\n", "half", hidden_tests=(TestCase((4,), 2),))
    r = verifier.verify(t, "    return x / 2\n")
    assert not r.passed and r.error_class == "TypeMismatch" and "float" in r.trace
    tb = Task("b", "def b(x):\n", "b", hidden_tests=(TestCase((1,), 1),))
    assert verifier.verify(tb, "    return True\n").error_class == "TypeMismatch"
    tl = Task("l", "def l():\n", "l", hidden_tests=(TestCase((), [1, (2, 3)]),))
    assert verifier.verify(tl, "    return [1, [2, 3]]\n").error_class == "TypeMismatch"
    assert verifier.verify(tl, "    return [1, (2, 3)]\n").passed
    loose = verifier.pipeline.model_copy(update={"strict_types": False})
    with Verifier(loose, jobs=1) as v:
        assert v.verify(t, "    return x / 2\n").passed


def test_partial_credit_off_is_all_or_nothing(verifier):
    p = verifier.pipeline.model_copy(update={"partial_credit": False})
    with Verifier(p, jobs=1) as v:
        r = v.verify(TASK, "    return 2 * x if x < 2 else 0\n")
        assert r.stages[2].score == 0.0


def test_readable_traces_for_exceptions(verifier):
    t = Task("d", "def d(xs):\n", "d", hidden_tests=(TestCase(([],), 0), TestCase(([2],), 2)))
    r = verifier.verify(t, "    return sum(xs) // len(xs)\n")
    assert r.error_class == "ZeroDivisionError"
    assert "ZeroDivisionError: integer division or modulo by zero at d([]) (line 2)" in r.trace
    big = Task("big", "def big(s):\n", "big", hidden_tests=(TestCase(("x" * 5000,), "y"),))
    r = verifier.verify(big, "    return s * 3\n")
    assert len(r.trace) <= 1000 and all(len(f.got_repr) <= 200 for f in r.failures)


def test_lint_and_perf_stages(tmp_path):
    with Verifier(load_pipeline(REPO / "verifiers" / "strict.toml"), jobs=1) as v:
        r = v.verify(TASK, TASK.canonical_solution)
        names = {s.name: s for s in r.stages}
        assert r.passed and names["lint"].passed and names["perf"].passed, r.trace
        r = v.verify(TASK, "    import os\n    return 2 * x\n")  # F401: unused import
        assert names and not [s for s in r.stages if s.name == "lint"][0].passed
        assert r.passed  # lint is optional: it costs reward, not the verdict
        assert r.reward < 1.0
        # CPU time, measured by the server: a busy loop is slow, a sleep is not (wall time is the timeout's)
        slow = "    n = 0\n    for i in range(300000):\n        n += i\n    return 2 * x\n"
        r = v.verify(TASK, slow)
        perf = [s for s in r.stages if s.name == "perf"][0]
        assert not perf.passed and perf.error_class == "TooSlow"


def test_big_ints_nan_and_containers_round_trip(verifier):
    t = Task("big", "def big(n):\n", "big", hidden_tests=(TestCase((3000,), 7**3000 - 1),))
    assert verifier.verify(t, "    return 7 ** n - 1\n").passed
    assert not verifier.verify(t, "    return 7 ** n\n").passed
    huge = Task("huge", "def huge():\n", "huge", hidden_tests=(TestCase((), 3**20000),))
    r = verifier.verify(huge, "    return 3 ** 20000 + 1\n")
    assert not r.passed and "too large to print" in r.trace
    odd = Task("odd", "def odd():\n", "odd", hidden_tests=(TestCase((), [frozenset({1}), {2: (3.5, None)}, b"x"]),))
    assert verifier.verify(odd, "    return [frozenset({1}), {2: (3.5, None)}, b'x']\n").passed
