"""The offline reflector: prompt edits from a lesson library, no LM.

It groups failures by signature (done by the reflective dataset), retrieves lessons
whose tags overlap those signatures, and proposes one edit per draft: add a retrieved
lesson (replacing the least relevant one when full), remove the least relevant lesson,
move the most relevant lesson first, or swap demonstrations for other verified
successes. It does not know which lessons help; selection measures that.

Departure from GEPA: GEPA's reflection is an LM rewriting an instruction. This one is a
retrieval-and-edit search over a user-curated library, so it is cheap, runs without a
model, and its proposals stay within text a user has vetted.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from evolve.prompt.candidate import Candidate
from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.demos import pick_demos, render_demos
from evolve.prompt.lessons import LessonLibrary, join_lessons, split_lessons
from evolve.prompt.recorder import LMRecorder, NullRecorder, recorded_call
from evolve.prompt.reflect.base import Draft
from evolve.prompt.reflective_dataset import ReflectiveDataset

OP_WEIGHTS = {"add-lesson": 0.6, "remove-lesson": 0.15, "reorder-lessons": 0.1, "swap-demos": 0.15}


def resolve_lessons_dir(path: str) -> Path:
    """``path`` as given, else relative to the checkout (a run started from another folder)."""
    p = Path(path)
    if p.is_dir() or p.is_absolute():
        return p
    repo = Path(__file__).resolve().parents[3] / p
    return repo if repo.is_dir() else p


def _features(dataset: ReflectiveDataset) -> Counter:
    c: Counter = Counter()
    for g in dataset.groups:
        for f in g["features"]:
            c[f] += int(g["count"])
    return c


class OfflineReflector:
    """Lesson-library reflector (model name "offline" in the lm-call record)."""

    name = "offline"

    def __init__(self, config: PromptEvolutionConfig, recorder: LMRecorder | None = None,
                 library: LessonLibrary | None = None) -> None:
        self.config = config
        self.recorder = recorder or NullRecorder()
        self.library = library if library is not None else LessonLibrary.load(resolve_lessons_dir(config.lessons_dir))

    def reflect(self, parent: Candidate, dataset: ReflectiveDataset, rng: random.Random, n: int,
                avoid: frozenset[str] = frozenset(), rejected: dict[str, int] | None = None) -> list[Draft]:
        seed = rng.getrandbits(32)
        # The library's hash goes into the response, not the request: a replay after the user
        # edited prompts/lessons still finds (and reproduces) what was proposed at the time.
        request = {
            "reflector": "offline", "version": 1, "parent": parent.components, "dataset": dataset.to_dict(),
            "seed": seed, "n": n, "avoid": sorted(avoid), **({"rejected": rejected} if rejected else {}),
            "max_lessons": self.config.max_lessons, "max_demos": self.config.max_demos,
        }

        def run():
            drafts = self._edits(parent, dataset, random.Random(seed), n, avoid, rejected or {})
            return {"proposals": drafts, "library": self.library.content_hash}, None, {}, 0.0

        out = recorded_call(self.recorder, "reflection", "offline", request, run)
        ids = [out.call_id] if out.call_id is not None else []
        return [Draft(p["components"], p["kind"], p["rationale"], ids) for p in out.response["proposals"]]

    # -- the edit search -------------------------------------------------------------------
    def _edits(self, parent: Candidate, dataset: ReflectiveDataset, rng: random.Random, n: int,
               avoid: frozenset[str], rejected: dict[str, int]) -> list[dict]:
        feats = _features(dataset)
        current = split_lessons(parent.components.get("lessons", ""))
        summary = ", ".join(f"{g['signature']} x{g['count']}" for g in dataset.groups[:4]) or "no failures"
        # Each rejection of a lesson halves its retrieval score: measured evidence beats tag overlap.
        retrieved = self.library.retrieve(feats, rng, exclude=set(current), k=8,
                                          weight={t: 0.5 ** c for t, c in rejected.items()})
        seen = set(avoid) | {parent.id[:16]}
        out: list[dict] = []
        tried: set[str] = set()
        for _ in range(6 * n):
            if len(out) >= n:
                break
            ops = self._applicable(current, retrieved, dataset)
            if not ops:
                break
            # Each applicable kind of edit once before any repeats, so a step explores different edits.
            fresh = [o for o in ops if o not in tried] or ops
            op = rng.choices(fresh, weights=[OP_WEIGHTS[o] for o in fresh])[0]
            tried.add(op)
            edit = getattr(self, "_" + op.replace("-", "_"))(parent, current, retrieved, feats, dataset, rng)
            if edit is None:
                continue
            comps, why = edit
            cand = Candidate(comps)
            if cand.id[:16] in seen:
                continue
            seen.add(cand.id[:16])
            out.append({"components": comps, "kind": op, "rationale": f"failures: {summary}; {why}"})
        return out

    def _applicable(self, current: list[str], retrieved: list, dataset: ReflectiveDataset) -> list[str]:
        ops = []
        if retrieved:
            ops.append("add-lesson")
        if current:
            ops.append("remove-lesson")
        if len(current) > 1:
            ops.append("reorder-lessons")
        if self.config.max_demos > 0 and dataset.demo_pool:
            ops.append("swap-demos")
        return ops

    def _relevance(self, text: str, feats: Counter) -> float:
        lesson = self.library.get(text)
        return 0.0 if lesson is None else float(sum(feats.get(t, 0) for t in lesson.tags))

    def _least_relevant(self, current: list[str], feats: Counter, rng: random.Random) -> str:
        order = list(current)
        rng.shuffle(order)
        return min(order, key=lambda t: self._relevance(t, feats))

    def _add_lesson(self, parent, current, retrieved, feats, dataset, rng):
        lesson, score = rng.choices(retrieved, weights=[s for _, s in retrieved])[0]
        retrieved.remove((lesson, score))
        lines = list(current)
        why = f"added {lesson.text!r} ({lesson.source}, tag score {score:g})"
        if len(lines) >= self.config.max_lessons:
            drop = self._least_relevant(lines, feats, rng)
            lines.remove(drop)
            why += f", replacing {drop!r}"
        lines.append(lesson.text)
        return parent.with_component("lessons", join_lessons(lines)).components, why

    def _remove_lesson(self, parent, current, retrieved, feats, dataset, rng):
        drop = self._least_relevant(current, feats, rng)
        lines = [t for t in current if t != drop]
        why = f"removed {drop!r} (relevance {self._relevance(drop, feats):g} to current failures)"
        return parent.with_component("lessons", join_lessons(lines)).components, why

    def _reorder_lessons(self, parent, current, retrieved, feats, dataset, rng):
        best = max(current, key=lambda t: self._relevance(t, feats))
        if current[0] == best:
            best = current[rng.randrange(1, len(current))]
        lines = [best] + [t for t in current if t != best]
        return parent.with_component("lessons", join_lessons(lines)).components, f"moved {best!r} first"

    def _swap_demos(self, parent, current, retrieved, feats, dataset, rng):
        demos = pick_demos(dataset.demo_pool, self.config.max_demos, rng)
        text = render_demos(demos)
        if text == parent.components.get("demos", ""):
            return None
        why = "demos from verified successes on " + ", ".join(d["task_id"] for d in demos)
        return parent.with_component("demos", text).components, why
