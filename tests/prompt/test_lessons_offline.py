import random
from collections import Counter
from pathlib import Path

import pytest
from prompt_helpers import div_failure, empty_failure, rollout

from evolve.errors import ConfigError, EvolveError
from evolve.prompt import (
    Candidate,
    MemoryRecorder,
    PromptEvolutionConfig,
    ReplayRecorder,
    build_reflective_dataset,
    load_seed_prompt,
    make_reflector,
)
from evolve.prompt.lessons import LessonLibrary, parse_lesson_file, split_lessons

REPO = Path(__file__).resolve().parents[2]
LESSONS = REPO / "prompts" / "lessons"


def cfg(**kw) -> PromptEvolutionConfig:
    return PromptEvolutionConfig(lessons_dir=str(LESSONS), **kw)


def test_library_parses_tags_and_holds_the_gym_notes_verbatim():
    lib = LessonLibrary.load(LESSONS)
    texts = {x.text for x in lib.lessons}
    from evolve.gym.notes import DISTRACTORS, NOTES

    assert set(NOTES.values()) <= texts and set(DISTRACTORS) <= texts
    k = lib.get("Include the boundary value k.")
    assert {"wronganswer", "zero", "negative"} <= k.tags
    assert len(texts) >= 30


def test_malformed_lesson_file_is_a_config_error(tmp_path):
    p = tmp_path / "bad.md"
    p.write_text("---\ntags: a\n- never closed\n")
    with pytest.raises(ConfigError, match="never closed"):
        parse_lesson_file(p)
    with pytest.raises(ConfigError, match="not a folder"):
        LessonLibrary.load(tmp_path / "nope")


def test_retrieval_scores_by_signature_overlap_and_breaks_ties_with_the_rng():
    lib = LessonLibrary.load(LESSONS)
    feats = Counter({"empty": 5, "valueerror": 5})
    got = lib.retrieve(feats, random.Random(0))
    assert got and all(s == 10 for _, s in got)  # all empty-input lessons tie
    assert {x.source.split(":")[0] for x, _ in got} == {"empty-inputs.md"}
    orders = {tuple(x.text for x, _ in lib.retrieve(feats, random.Random(s))) for s in range(6)}
    assert len(orders) > 1  # ties are broken by the seed, not by file order
    assert lib.retrieve(feats, random.Random(3)) == lib.retrieve(feats, random.Random(3))
    assert lib.retrieve(Counter({"nothing-matches": 9}), random.Random(0)) == []


def test_offline_reflector_adds_retrieved_lessons_and_records_the_call():
    rec = MemoryRecorder()
    c = cfg(proposals_per_step=3, max_lessons=2)
    refl = make_reflector(c, rec)
    seed = load_seed_prompt(REPO / "prompts" / "tiny-coder.toml")
    rs = [empty_failure(f"t{i}") for i in range(6)] + [rollout("ok", True)]
    ds = build_reflective_dataset(rs, c, random.Random(0))
    drafts = refl.reflect(seed, ds, random.Random(0), 3)
    assert len(drafts) == 3 and len({Candidate(d.components).id for d in drafts}) == 3
    lib = LessonLibrary.load(LESSONS)
    for d in drafts:
        assert d.kind == "add-lesson" and d.lm_call_ids == [1]
        (line,) = split_lessons(d.components["lessons"])
        assert "empty" in lib.get(line).tags
        assert d.components["system"] == seed.components["system"]
    assert [(x.role, x.model) for x in rec.calls] == [("reflection", "offline")]


def test_offline_edits_respect_max_lessons_and_can_remove_or_reorder():
    c = cfg(proposals_per_step=8, max_lessons=2)
    refl = make_reflector(c)
    parent = Candidate({"system": "S", "lessons": "Keep the code short.\nUse // for integer division."})
    rs = [empty_failure("a"), empty_failure("b"), div_failure("c")]
    drafts = refl.reflect(parent, build_reflective_dataset(rs, c, random.Random(0)), random.Random(4), 8)
    kinds = {d.kind for d in drafts}
    assert {"add-lesson", "remove-lesson"} <= kinds
    for d in drafts:
        assert len(split_lessons(d.components["lessons"])) <= 2
        if d.kind == "remove-lesson":  # the least relevant line goes: the distractor, not the division note
            assert split_lessons(d.components["lessons"]) == ["Use // for integer division."]


def test_swap_demos_uses_only_verified_successes():
    c = cfg(proposals_per_step=6, max_demos=1)
    refl = make_reflector(c)
    rs = [empty_failure("a"), rollout("b", True, completion="def f(xs):\n    return sum(xs)\n",
                                      prompt="Sum of xs.")]
    ds = build_reflective_dataset(rs, c, random.Random(0))
    drafts = refl.reflect(Candidate({"system": "S"}), ds, random.Random(1), 6)
    demos = [d for d in drafts if d.kind == "swap-demos"]
    assert demos and "Sum of xs." in demos[0].components["demos"] and "return sum(xs)" in demos[0].components["demos"]


def test_replay_serves_recorded_offline_responses_and_a_miss_is_an_error():
    c = cfg(proposals_per_step=2)
    rec = MemoryRecorder()
    seed = Candidate({"system": "S", "lessons": ""})
    ds = build_reflective_dataset([empty_failure("a"), div_failure("b")], c, random.Random(0))
    first = make_reflector(c, rec).reflect(seed, ds, random.Random(7), 2)
    replayed = make_reflector(c, ReplayRecorder(rec)).reflect(seed, ds, random.Random(7), 2)
    assert [d.components for d in first] == [d.components for d in replayed]
    with pytest.raises(EvolveError, match="replay: no recorded response"):
        make_reflector(c, ReplayRecorder(rec)).reflect(seed, ds, random.Random(8), 2)
