"""Per-task Pareto frontier, parent selection and merge, over gepa 0.1.4's own strategies.

gepa keeps programs in a ``GEPAState`` filled by its engine; our loop drives evolution
step by step and owns its state (the lineage is the source of truth), so the frontier is
computed here from plain per-task score dicts and handed to gepa's pure functions
(``select_program_candidate_from_pareto_front``, ``find_dominator_programs``,
``sample_and_attempt_merge_programs_by_common_predictors``) instead of building a
GEPAState. Only the view of ``lessons`` as one component per line is ours (see
:func:`merge_view`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from gepa.gepa_utils import find_dominator_programs, select_program_candidate_from_pareto_front
from gepa.proposer.merge import sample_and_attempt_merge_programs_by_common_predictors

from evolve.prompt.lessons import join_lessons, split_lessons


def mean(scores: dict[str, float]) -> float:
    return sum(scores.values()) / len(scores) if scores else 0.0


def pareto_front(val_scores: Sequence[dict[str, float] | None]) -> dict[str, set[int]]:
    """task_id -> indices of the programs with the best score on it (among programs evaluated on it)."""
    best: dict[str, float] = {}
    for scores in val_scores:
        for t, s in (scores or {}).items():
            best[t] = max(best.get(t, float("-inf")), s)
    front: dict[str, set[int]] = {t: set() for t in best}
    for i, scores in enumerate(val_scores):
        for t, s in (scores or {}).items():
            if s >= best[t]:
                front[t].add(i)
    return dict(sorted(front.items()))


def select_from_front(val_scores: Sequence[dict[str, float] | None], rng: random.Random) -> int:
    """gepa's Pareto selection: sample a non-dominated program, weighted by how many tasks it is best on."""
    front = pareto_front(val_scores)
    agg = [mean(s or {}) for s in val_scores]
    return select_program_candidate_from_pareto_front(front, agg, rng)


def dominators(val_scores: Sequence[dict[str, float] | None]) -> list[int]:
    agg = [mean(s or {}) for s in val_scores]
    return sorted(find_dominator_programs(pareto_front(val_scores), agg))


LINE = "lessons::"  # prefix of the per-line presence components in the merge view


def merge_view(components: dict[str, str]) -> dict[str, str]:
    """The candidate as gepa's merge sees it: each lesson line is its own component ("1" = present).

    gepa merges whole components and only when one side left a component as the ancestor
    had it. Our edits all touch ``lessons``, a list of independent lines, so two branches
    that each added a different lesson would never merge. Viewing every line as a
    component lets gepa's own triplet logic do a three-way line merge: a line added by
    either side is kept, a line removed by either side is dropped.
    """
    view = {k: v for k, v in components.items() if k != "lessons"}
    for line in split_lessons(components.get("lessons", "")):
        view[LINE + line] = "1"
    return view


def from_merge_view(view: dict[str, str], orders: Sequence[dict[str, str]], max_lessons: int) -> dict[str, str]:
    """Back from the merge view; lesson order follows the first parent, then the second, then the ancestor."""
    present = {k[len(LINE):] for k, v in view.items() if k.startswith(LINE) and v}
    lines: list[str] = []
    for comps in orders:
        lines += [t for t in split_lessons(comps.get("lessons", "")) if t in present and t not in lines]
    out = {k: v for k, v in view.items() if not k.startswith(LINE)}
    if lines or any("lessons" in c for c in orders):
        out["lessons"] = join_lessons(lines[:max_lessons])
    return out


def try_merge(components: Sequence[dict[str, str]], parents: Sequence[Sequence[int]],
              val_scores: Sequence[dict[str, float] | None], merges_performed: tuple[list, list],
              rng: random.Random, max_lessons: int) -> tuple[dict[str, str], int, int, int] | None:
    """gepa's common-ancestor merge over our pool; returns (components, i, j, ancestor) or None.

    Components missing from a program are empty text in the view (gepa needs equal key sets).
    """
    views = [merge_view(c) for c in components]
    keys = sorted({k for v in views for k in v})
    padded = [{k: v.get(k, "") for k in keys} for v in views]
    agg = [mean(s or {}) for s in val_scores]
    # gepa draws the ancestor with weights = its score, which fails when every candidate ancestor
    # scored 0; a constant shift keeps every comparison and makes the weights positive.
    low = min(agg)
    agg = [a - low + 1e-6 for a in agg]
    evaluated = {i for i, s in enumerate(val_scores) if s}
    cands = [i for i in dominators(val_scores) if i in evaluated]
    got = sample_and_attempt_merge_programs_by_common_predictors(
        agg_scores=agg, rng=rng, merge_candidates=cands, merges_performed=merges_performed,
        program_candidates=padded, parent_program_for_candidate=[list(p) for p in parents])
    if got is None:
        return None
    merged, i, j, anc = got
    merges_performed[0].append((i, j, anc))
    out = from_merge_view(merged, [components[i], components[j], components[anc]], max_lessons)
    present = {k for c in (components[i], components[j]) for k in c}
    return {k: v for k, v in out.items() if k in present or v}, i, j, anc
