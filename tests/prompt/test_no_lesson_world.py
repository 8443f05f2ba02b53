"""The ablation's no-lesson world (issue 38): prompts/lessons/no-lesson/ is the default lesson library
without the gym's helpful lines, so no proposal can help and every look the prompt lever takes is
exploring. configs/ablation-no-lesson.toml is the gym's ablation config pointed at it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from evolve.gym.notes import NOTES, modes_switched_off
from evolve.loop.config import LoopConfig
from evolve.prompt.lessons import LessonLibrary

REPO = Path(__file__).resolve().parents[2]
DEFAULT, NO_LESSON = REPO / "prompts" / "lessons", REPO / "prompts" / "lessons" / "no-lesson"


def test_the_no_lesson_library_switches_off_no_bug_mode():
    """No lesson, nor all of them together as system lines, switches off any of the teacher's bug modes
    (the teacher obeys only NOTES' exact lines)."""
    lessons = LessonLibrary.load(NO_LESSON).lessons
    assert lessons
    assert not [x.text for x in lessons if x.text in NOTES.values()]
    assert modes_switched_off("\n".join(x.text for x in lessons)) == frozenset()
    # the default library does hold them: the world differs exactly there
    assert modes_switched_off("\n".join(x.text for x in LessonLibrary.load(DEFAULT).lessons)) == frozenset(NOTES)


def test_the_no_lesson_library_is_the_default_one_less_the_helpful_lines():
    """Everything else stays, tags included, so reflection proposes as it does on the gym."""
    default = {(x.text, x.tags) for x in LessonLibrary.load(DEFAULT).lessons}
    helpful = {(t, tags) for t, tags in default if t in NOTES.values()}
    assert len(helpful) == len(NOTES)
    assert {(x.text, x.tags) for x in LessonLibrary.load(NO_LESSON).lessons} == default - helpful


def test_the_no_lesson_config_is_the_gym_ablation_on_that_library():
    gym = tomllib.loads((REPO / "configs" / "ablation.toml").read_text())["loop"]
    world = tomllib.loads((REPO / "configs" / "ablation-no-lesson.toml").read_text())["loop"]
    assert world["prompt"].pop("lessons_dir") == "prompts/lessons/no-lesson"
    assert world == gym
    loaded = LoopConfig.from_toml(REPO / "configs" / "ablation-no-lesson.toml")
    assert loaded.prompt.lessons_dir == "prompts/lessons/no-lesson"
