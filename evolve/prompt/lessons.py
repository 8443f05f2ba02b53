"""The lesson library: ``prompts/lessons/*.md``, edited by users.

Format of one file (one topic)::

    ---
    title: Empty inputs
    tags: empty, indexerror, zerodivisionerror, valueerror
    ---
    - Handle the empty list.
    - Return 0 for an empty sum.  {tags: zero, wronganswer}

Front-matter ``tags`` apply to every bullet; ``{tags: ...}`` at the end of a bullet adds
its own. Tags are failure-signature features (lower-case error types such as
``zerodivisionerror``, input shapes such as ``empty`` / ``negative`` / ``single``,
output shapes such as ``division`` / ``off-by-one``, or message keywords). Retrieval
knows nothing about which lessons help: it scores by tag overlap with the observed
failures, and measurement decides.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from evolve.errors import ConfigError
from evolve.util.hashing import content_hash

_INLINE_TAGS = re.compile(r"\s*\{tags:\s*([^}]*)\}\s*$")


@dataclass(frozen=True)
class Lesson:
    text: str  # exactly the line that goes into the prompt
    tags: frozenset[str]
    source: str  # "<file>:<line>"

    @property
    def id(self) -> str:
        return content_hash(self.text)[:12]


def _split_tags(s: str) -> frozenset[str]:
    return frozenset(t.strip().lower() for t in re.split(r"[,\s]+", s.strip("[] ")) if t.strip())


def parse_lesson_file(path: Path) -> list[Lesson]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tags: frozenset[str] = frozenset()
    start = 0
    if lines and lines[0].strip() == "---":
        try:
            end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        except StopIteration:
            raise ConfigError(f"{path}: front matter opened with '---' is never closed") from None
        for line in lines[1:end]:
            key, sep, value = line.partition(":")
            if not sep:
                raise ConfigError(f"{path}: front matter line {line!r} is not 'key: value'")
            if key.strip() == "tags":
                tags = _split_tags(value)
        start = end + 1
    out = []
    for i, line in enumerate(lines[start:], start=start + 1):
        s = line.strip()
        if not s.startswith(("- ", "* ")):
            continue
        body = s[2:].strip()
        own: frozenset[str] = frozenset()
        m = _INLINE_TAGS.search(body)
        if m:
            own = _split_tags(m.group(1))
            body = body[: m.start()].strip()
        if body:
            out.append(Lesson(body, tags | own, f"{path.name}:{i}"))
    return out


class LessonLibrary:
    """All lessons of a folder, deduplicated by text (first occurrence wins, files in name order)."""

    def __init__(self, lessons: list[Lesson]) -> None:
        seen: dict[str, Lesson] = {}
        for lesson in lessons:
            seen.setdefault(lesson.text, lesson)
        self.lessons = list(seen.values())
        self._by_text = seen

    @classmethod
    def load(cls, folder: str | Path) -> LessonLibrary:
        folder = Path(folder)
        if not folder.is_dir():
            raise ConfigError(f"lesson library {folder} is not a folder")
        lessons = [lesson for p in sorted(folder.glob("*.md")) for lesson in parse_lesson_file(p)]
        return cls(lessons)

    @property
    def content_hash(self) -> str:
        return content_hash([[x.text, sorted(x.tags)] for x in self.lessons])

    def get(self, text: str) -> Lesson | None:
        return self._by_text.get(text.strip())

    def retrieve(self, features: Counter, rng: random.Random, exclude: set[str] = frozenset(),
                 k: int = 8, weight: dict[str, float] | None = None) -> list[tuple[Lesson, float]]:
        """Lessons whose tags overlap the failure features, best first.

        Score = failures carrying each matching tag, summed, times ``weight[text]`` (default 1);
        ties broken by ``rng`` (seeded by the caller).
        """
        weight = weight or {}
        scored = []
        for lesson in self.lessons:
            if lesson.text in exclude:
                continue
            score = float(sum(features.get(t, 0) for t in lesson.tags)) * weight.get(lesson.text, 1.0)
            if score > 0:
                scored.append((lesson, score))
        rng.shuffle(scored)  # random tie order; the sort below is stable
        scored.sort(key=lambda x: -x[1])
        return scored[:k]


def split_lessons(text: str) -> list[str]:
    """The lesson lines of a ``lessons`` component (bullets or plain lines)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(("- ", "* ")):
            s = s[2:].strip()
        if s:
            out.append(s)
    return out


def join_lessons(lines: list[str]) -> str:
    return "\n".join(lines)
