"""tiny-coder gym: determinism, size, composition-disjoint splits, tests that catch the teacher's bugs."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from evolve.errors import ConfigError
from evolve.gym import BUG_MODES, NOTES, SEED_INSTRUCTION, check, load_gym, load_suite, teacher_solution
from evolve.gym.grammar import composition_from_names
from evolve.gym.suite import read_suite_toml


def test_generator_is_deterministic_and_large():
    a, b = load_gym("train", seed=0), load_gym("train", seed=0)
    assert [t.content_hash for t in a] == [t.content_hash for t in b]
    assert len(a) >= 2000 and len({t.task_id for t in a}) == len(a)
    assert len({t.prompt for t in a}) >= 2000  # distinct contents, not only ids
    held = load_gym("heldout", seed=0)
    assert 150 <= len(held) <= 600
    other_seed = load_gym("heldout", seed=1)
    assert [t.task_id for t in other_seed] == [t.task_id for t in held]  # same compositions
    assert sum(x.hidden_tests != y.hidden_tests for x, y in zip(held, other_seed, strict=True)) > len(held) // 2
    assert {t.meta["family"] for t in a} == {"list", "range", "pairs", "words"}


def test_subsets_are_deterministic_prefixes():
    small, big = load_gym("heldout", n=10), load_gym("heldout", n=40)
    assert [t.task_id for t in small] == [t.task_id for t in big[:10]]
    assert [t.task_id for t in load_gym("heldout", n=10)] == [t.task_id for t in small]


def test_splits_differ_by_composition():
    comps = lambda ts: {tuple(t.meta["composition"]) for t in ts}  # noqa: E731
    train, held = comps(load_gym("train")), comps(load_gym("heldout"))
    assert not train & held
    # held-out compositions are unseen combinations of seen pieces
    for pos in range(4):
        assert {c[pos] for c in held} <= {c[pos] for c in train}


def test_task_shape(gym_tasks):
    for t in gym_tasks:
        assert t.suite == "tiny-coder" and t.task_id.startswith(f"tc/{t.meta['family']}/")
        assert t.entry_point == "f" and t.canonical_solution.startswith("def f(")
        assert 2 <= len(t.visible_tests) <= 3 and 8 <= len(t.hidden_tests) <= 14
        lines = t.prompt.splitlines()
        assert lines[1].startswith("def f(") and all(" == " in ln for ln in lines[2:])
        assert set(t.meta["bug_modes"]) <= set(BUG_MODES)
        assert t.hidden_tests[0].inputs[0] in ([], 0, "")  # the empty-input edge case is always there


def test_every_canonical_solution_passes_its_tests():
    for split in ("train", "heldout"):
        bad = [t.task_id for t in load_gym(split) if not check.passes(t.canonical_solution, t.hidden_tests
                                                                       + t.visible_tests)]
        assert bad == []


def test_real_verifier_passes_references_and_fails_teacher_bugs():
    from evolve.verification import Verifier

    held = load_gym("heldout")
    train = random.Random(3).sample(load_gym("train"), 150)
    rng = random.Random(4)
    always = dict.fromkeys(BUG_MODES, 1.0)
    buggy = [(t, teacher_solution(t, rng, "", always)[0]) for t in held + train if t.meta["bug_modes"]]
    with Verifier(jobs=2) as v:
        good = v.verify_batch([(t, t.canonical_solution) for t in held + train])
        bad = v.verify_batch(buggy)
    assert [r.task_id for r in good if not r.passed] == []
    assert [r.task_id for r in bad if r.passed] == []
    assert len({r.error_class for r in bad}) >= 3  # crashes, type mismatches, wrong answers


def test_expected_types_are_exact():
    t = next(t for t in load_gym("train") if "DIV" in t.meta["bug_modes"])
    comp = composition_from_names(t.meta["composition"])
    float_version = comp.render({"DIV"})
    assert not check.passes(float_version, t.hidden_tests)
    assert check.same([1, 2], [1, 2]) and not check.same([1.0, 2], [1, 2]) and not check.same(True, 1)


def test_each_bug_mode_is_caught_by_hidden_tests():
    tasks = load_gym("train")
    for t in random.Random(0).sample(tasks, 300):
        comp = composition_from_names(t.meta["composition"])
        for mode in t.meta["bug_modes"]:
            for style in (0, 1):
                assert not check.passes(comp.render({mode}, style=style), t.hidden_tests), (t.task_id, mode)


def test_teacher_injects_bugs_at_configured_rates_and_notes_suppress_them():
    tasks = [t for t in load_gym("train") if t.meta["bug_modes"]]
    sample = random.Random(1).sample(tasks, 400)
    rates = {"EMPTY": 0.4, "DIV": 0.4, "OFF1": 0.4, "CMP": 0.9}
    rng = random.Random(2)
    hits, seen, fails = Counter(), Counter(), 0
    for t in sample:
        code, bugs = teacher_solution(t, rng, SEED_INSTRUCTION, rates)
        for m in t.meta["bug_modes"]:
            seen[m] += 1
            hits[m] += m in bugs
        fails += bool(bugs) and not check.passes(code, t.hidden_tests)
        assert bool(bugs) == (not check.passes(code, t.hidden_tests))  # a bug always fails, none passes
    for m, p in rates.items():
        assert abs(hits[m] / seen[m] - p) < 0.12, (m, hits[m], seen[m])
    all_notes = "\n".join([SEED_INSTRUCTION, *NOTES.values()])
    for t in sample:
        code, bugs = teacher_solution(t, rng, all_notes, rates)
        assert bugs == [] and check.passes(code, t.hidden_tests)
    # one note switches off exactly its own mode
    cmp_task = next(t for t in sample if t.meta["bug_modes"] == ["CMP"])
    with_note = [teacher_solution(cmp_task, rng, NOTES["CMP"], {"CMP": 1.0})[1] for _ in range(20)]
    with_other = [teacher_solution(cmp_task, rng, NOTES["DIV"], {"CMP": 1.0})[1] for _ in range(20)]
    assert all(b == [] for b in with_note) and all(b == ["CMP"] for b in with_other)


def test_suite_toml_is_read_and_validated(tmp_path):
    splits = load_suite("tiny-coder")
    assert set(splits) == {"train", "heldout"} and len(splits["train"]) > 2000
    bad = tmp_path / "bad.toml"
    bad.write_text("[generator]\nheldout_fractoin = 0.2\n")
    with pytest.raises(ConfigError, match="unknown"):
        read_suite_toml(bad)
    bad.write_text("[generator]\nheldout_fraction = 2.0\n")
    with pytest.raises(ConfigError):
        read_suite_toml(bad)
    small = tmp_path / "small.toml"
    small.write_text("[generator]\nheldout_fraction = 0.3\ntrain_variants = 1\n")
    held = load_gym("heldout", suite=small)
    assert len(held) > len(load_gym("heldout"))
    with pytest.raises(ConfigError):
        load_gym("valid")
    with pytest.raises(ConfigError):
        composition_from_names(["list", "nope", "id", "sum"])
