"""Per-task Pareto frontier, parent selection and merge, over gepa 0.1.4's own strategies.

gepa keeps programs in a ``GEPAState`` filled by its engine; our loop drives evolution
step by step and owns its state (the lineage is the source of truth), so the frontier is
computed here from plain per-task score dicts and handed to gepa's pure functions
(``select_program_candidate_from_pareto_front``, ``find_dominator_programs``,
``sample_and_attempt_merge_programs_by_common_predictors``) instead of building a
GEPAState. Only the per-component merge of the ``lessons`` list is ours (see
:func:`merge_lessons`).
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


def merge_lessons(ancestor: str, a: str, b: str, max_lessons: int) -> str:
    """Three-way merge of lesson lists: keep what neither side removed, add what either side added.

    gepa merges whole components (it takes one side's text when both changed it); lessons are
    a list of independent lines, so both sides' additions can be kept. Capped at ``max_lessons``.
    """
    anc, la, lb = split_lessons(ancestor), split_lessons(a), split_lessons(b)
    removed = (set(anc) - set(la)) | (set(anc) - set(lb))
    out = [t for t in la if t not in removed]
    out += [t for t in lb if t not in out and t not in removed]
    return join_lessons(out[:max_lessons])


def try_merge(components: Sequence[dict[str, str]], parents: Sequence[Sequence[int]],
              val_scores: Sequence[dict[str, float] | None], merges_performed: tuple[list, list],
              rng: random.Random, max_lessons: int) -> tuple[dict[str, str], int, int, int] | None:
    """gepa's common-ancestor merge over our pool; returns (components, i, j, ancestor) or None.

    Components missing from a program are treated as empty text (gepa needs equal key sets).
    """
    keys = sorted({k for c in components for k in c})
    padded = [{k: c.get(k, "") for k in keys} for c in components]
    agg = [mean(s or {}) for s in val_scores]
    evaluated = [i for i, s in enumerate(val_scores) if s]
    cands = [i for i in dominators(val_scores) if i in evaluated]
    got = sample_and_attempt_merge_programs_by_common_predictors(
        agg_scores=agg, rng=rng, merge_candidates=cands, merges_performed=merges_performed,
        program_candidates=padded, parent_program_for_candidate=[list(p) for p in parents])
    if got is None:
        return None
    merged, i, j, anc = got
    merges_performed[0].append((i, j, anc))
    if "lessons" in keys:
        a, b, o = padded[i]["lessons"], padded[j]["lessons"], padded[anc]["lessons"]
        if a != o and b != o:
            merged["lessons"] = merge_lessons(o, a, b, max_lessons)
    present = {k for c in (components[i], components[j]) for k in c}
    return {k: v for k, v in merged.items() if k in present or v}, i, j, anc
