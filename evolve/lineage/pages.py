"""Read-only, paged queries for browsing a lineage (`evolve ui`, `evolve export`).

Every function reads one page or one aggregate, never a whole table, so a page costs the
same on a 10,000-generation, 1,000,000-rollout database as on a small one. Metric curves
pull only the few numbers they plot out of the JSON column (``JSON_EXTRACT`` / ``->``),
not the metrics documents. Core selects only; results are plain dicts.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from sqlalchemy import Integer, String, cast, func, select, union

from evolve.errors import LineageError
from evolve.lineage import tables as t

PAGE = 100
g, r, pv, pp, call, link, wv = (t.generation, t.rollout, t.prompt_version, t.prompt_parent, t.lm_call,
                                t.prompt_lm_call, t.weights_version)


def _metric(*path: str):
    """A number inside ``generation.metrics`` (NULL where the path is absent or not a number)."""
    return g.c.metrics[path if len(path) > 1 else path[0]].as_float()


def run_name(store, run_id: int) -> str | None:
    with store.engine.connect() as conn:
        return conn.scalar(select(t.run.c.name).where(t.run.c.id == run_id))


def run_row(store, name: str) -> dict:
    with store.engine.connect() as conn:
        row = conn.execute(select(t.run.c.id, t.run.c.name, t.run.c.config, cast(t.run.c.created_at, String),
                                  t.run.c.code_version).where(t.run.c.name == name)).first()
    if row is None:
        raise LineageError(f"unknown run {name!r}")
    return {"id": row[0], "name": row[1], "config": row[2] or {}, "created_at": row[3], "code_version": row[4],
            **run_facts(row[2] or {})}


def run_facts(config: dict) -> dict:
    """Mode, held-out ks and sandbox isolation from a run's config (older runs lack isolation)."""
    loop = config.get("loop") if isinstance(config.get("loop"), dict) else {}
    iso = config.get("verifier_isolation", loop.get("verifier_isolation"))
    ks = loop.get("heldout_ks") or [1]
    return {"mode": loop.get("mode", config.get("mode")), "isolation": iso,
            "ks": [int(k) for k in ks if isinstance(k, int | float)] or [1]}


def runs_overview(store) -> list[dict]:
    """Every run: counts, mode, isolation and the newest committed generation's held-out pass@1."""
    newest = (select(g.c.run_id, func.max(g.c.index).label("last")).where(g.c.status == "committed")
              .group_by(g.c.run_id).subquery())
    latest = (select(g.c.run_id, g.c.index, _metric("heldout", "pass@1"))
              .join(newest, (newest.c.run_id == g.c.run_id) & (newest.c.last == g.c.index)))
    counts = select(g.c.run_id, g.c.status, func.count()).group_by(g.c.run_id, g.c.status)
    with store.engine.connect() as conn:
        runs = conn.execute(select(t.run.c.id, t.run.c.name, t.run.c.config, cast(t.run.c.created_at, String))
                            .order_by(t.run.c.created_at, t.run.c.id)).all()
        last = {rid: (idx, p1) for rid, idx, p1 in conn.execute(latest)}
        n: dict[int, dict] = {}
        for rid, status, k in conn.execute(counts):
            n.setdefault(rid, {})[status] = k
    out = []
    for rid, name, config, created in runs:
        idx, p1 = last.get(rid, (None, None))
        st = n.get(rid, {})
        out.append({"id": rid, "name": name, "created_at": created, **run_facts(config or {}),
                    "generations": sum(st.values()), "committed": st.get("committed", 0),
                    "pending": st.get("pending", 0), "failed": st.get("failed", 0),
                    "latest": idx, "latest_pass1": p1})
    return out


def generations_page(store, run_id: int, offset: int = 0, limit: int = PAGE) -> tuple[list[dict], int]:
    """Generations with ``offset <= index < offset + limit``, with parent/child links and key numbers,
    and how many index slots the run has (max index + 1). A range on the unique (run, index) key, not
    OFFSET, so the last page costs what the first does."""
    parent = g.alias("parent")
    q = (select(g.c.id, g.c.index, g.c.parent_id, parent.c.index, g.c.prompt_version, g.c.weights_version,
                parent.c.prompt_version, parent.c.weights_version, g.c.status, _metric("heldout", "pass@1"),
                _metric("train_reward"), _metric("update", "loss"), pv.c.proposed_by, wv.c.parent, g.c.error)
         .select_from(g.outerjoin(parent, parent.c.id == g.c.parent_id)
                      .outerjoin(pv, pv.c.id == g.c.prompt_version).outerjoin(wv, wv.c.id == g.c.weights_version))
         .where(g.c.run_id == run_id, g.c.index >= offset, g.c.index < offset + limit).order_by(g.c.index))
    with store.engine.connect() as conn:
        last = conn.scalar(select(func.max(g.c.index)).where(g.c.run_id == run_id))
        total = 0 if last is None else last + 1
        rows = conn.execute(q).all()
        ids = [row[0] for row in rows]
        kids: dict[int, list[int]] = {}
        for pid, idx in conn.execute(select(g.c.parent_id, g.c.index).where(g.c.parent_id.in_(ids))
                                     .order_by(g.c.index)):
            kids.setdefault(pid, []).append(idx)
    out = []
    for (gid, idx, pid, pidx, pvh, wvh, ppv, pwv, status, p1, reward, loss, how, wparent, err) in rows:
        out.append({"id": gid, "index": idx, "parent_id": pid, "parent_index": pidx, "prompt_version": pvh,
                    "weights_version": wvh, "weights_parent": wparent, "status": status, "pass1": p1,
                    "train_reward": reward, "loss": loss, "proposed_by": how, "error": err,
                    "prompt_changed": bool(pvh) and pvh != ppv, "weights_changed": bool(wvh) and wvh != pwv,
                    "fork": pidx is not None and pidx != idx - 1, "children": kids.get(gid, [])})
    return out, int(total or 0)


CURVE_PATHS = {"train_reward": ("train_reward",), "all_fail": ("routing", "all_fail"),
               "groups": ("routing", "groups"), "delta_weights": ("attribution", "delta_weights"),
               "delta_prompt": ("attribution", "delta_prompt")}


def curves(store, run_id: int, ks: list[int], max_points: int = 400) -> dict:
    """Per committed generation (by index): held-out pass@k, train reward, all-fail share, attribution.

    More than ``max_points`` generations are averaged into ``max_points`` equal buckets of indices.
    """
    paths = {f"pass@{k}": ("heldout", f"pass@{k}") for k in ks} | CURVE_PATHS
    names = list(paths)
    where = (g.c.run_id == run_id, g.c.status == "committed")
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":  # one JSON parse per row: json_extract with many paths -> an array
            spec = [".".join(f'"{p}"' for p in path) for path in paths.values()]
            arr = func.json_extract(g.c.metrics, *[f"$.{x}" for x in spec])
            rows = [(i, json.loads(a) if a else [None] * len(names))
                    for i, a in conn.execute(select(g.c.index, arr).where(*where).order_by(g.c.index))]
        else:
            cols = [_metric(*path) for path in paths.values()]
            rows = [(row[0], list(row[1:])) for row in conn.execute(select(g.c.index, *cols).where(*where)
                                                                    .order_by(g.c.index))]
    xs = [i for i, _ in rows]
    series: dict[str, list] = {n: [_num(vals[k]) for _, vals in rows] for k, n in enumerate(names)}
    share = [a / n if a is not None and n else None for a, n in zip(series.pop("all_fail"),
                                                                     series.pop("groups"), strict=True)]
    series["all_fail_share"] = share
    return {"x": xs, "series": series, "n": len(xs), **_bucket(xs, series, max_points)}


def run_version(store, run_id: int) -> tuple:
    """Changes whenever the run's curves can: the newest generation's index, status and commit time
    (generations are begun in index order and only the newest can still change status)."""
    newest = select(func.max(g.c.index)).where(g.c.run_id == run_id).scalar_subquery()
    with store.engine.connect() as conn:
        row = conn.execute(select(g.c.index, g.c.status, cast(g.c.committed_at, String))
                           .where(g.c.run_id == run_id, g.c.index == newest)).first()
    return tuple(row) if row else ()


def _num(v):
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _bucket(xs: list, series: dict, max_points: int) -> dict:
    if len(xs) <= max_points:
        return {"bucketed": False}
    size = -(-len(xs) // max_points)
    out_x = [sum(xs[i:i + size]) / len(xs[i:i + size]) for i in range(0, len(xs), size)]
    for name, vals in series.items():
        means = []
        for i in range(0, len(vals), size):
            chunk = [v for v in vals[i:i + size] if v is not None]
            means.append(sum(chunk) / len(chunk) if chunk else None)
        series[name] = means
    xs[:] = out_x
    return {"bucketed": True, "bucket": size}


def _run_prompt_ids(run_id: int):
    """Prompt versions a run used or whose reflection calls it made (a selectable of ids)."""
    used = select(g.c.prompt_version.label("id")).where(g.c.run_id == run_id, g.c.prompt_version.is_not(None))
    proposed = (select(link.c.prompt_version.label("id")).join(call, call.c.id == link.c.lm_call_id)
                .join(g, g.c.id == call.c.generation_id).where(g.c.run_id == run_id))
    return union(used, proposed).subquery()


def prompt_dag_page(store, run_id: int, lo: int = 0, hi: int = PAGE) -> list[dict]:
    """The prompt versions that generations ``lo <= index < hi`` of the run proposed or used, newest
    first, each with its parents, changed lines (the lesson), evidence (``meta``) and verdict.

    Paged by generation range like ``generations_page``: a few indexed lookups per page
    (generation -> its lm calls -> the versions they proposed), however long the run.
    """
    with store.engine.connect() as conn:
        gens = conn.execute(select(g.c.id, g.c.index, g.c.prompt_version)
                            .where(g.c.run_id == run_id, g.c.index >= lo, g.c.index < hi)).all()
        index_of = {gid: idx for gid, idx, _ in gens}
        when: dict[str, int] = {}  # version -> the newest generation on this page that proposed or used it
        used: dict[str, int] = {}
        for _, idx, pvid in gens:
            if pvid:
                used[pvid] = min(idx, used.get(pvid, idx))
                when[pvid] = max(idx, when.get(pvid, idx))
        calls: dict[str, list[int]] = {}
        call_gen = dict(conn.execute(select(call.c.id, call.c.generation_id)
                                     .where(call.c.generation_id.in_(list(index_of)))).all())
        for pid, cid in conn.execute(select(link.c.prompt_version, link.c.lm_call_id)
                                     .where(link.c.lm_call_id.in_(list(call_gen))).order_by(link.c.lm_call_id)):
            calls.setdefault(pid, []).append(cid)
            when[pid] = max(index_of[call_gen[cid]], when.get(pid, -1))
        found = {row[0]: row for row in conn.execute(
            select(pv.c.id, pv.c.components, pv.c.proposed_by, pv.c.meta, cast(pv.c.created_at, String))
            .where(pv.c.id.in_(list(when))))}
        parents: dict[str, list[str]] = {}
        for child, parent in conn.execute(select(pp.c.child, pp.c.parent).where(pp.c.child.in_(list(found)))
                                          .order_by(pp.c.child, pp.c.position)):
            parents.setdefault(child, []).append(parent)
        wanted = {p for ps in parents.values() for p in ps}
        comps = dict(conn.execute(select(pv.c.id, pv.c.components).where(pv.c.id.in_(wanted))).all())
    order = sorted(found, key=lambda pid: (-when[pid], found[pid][4] or "", pid), reverse=False)
    out = []
    for pid in order:
        _, components, how, meta, created = found[pid]
        ps = parents.get(pid, [])
        base = comps.get(ps[0], {}) if ps else {}
        out.append({"id": pid, "components": components or {}, "proposed_by": how, "meta": meta or {},
                    "created_at": created, "parents": ps, "first_used": used.get(pid),
                    "lm_calls": calls.get(pid, []), "changes": line_changes(base, components or {}),
                    "accepted": (meta or {}).get("accepted")})
    return out


def line_changes(before: dict, after: dict) -> list[tuple[str, str, str]]:
    """(component, '+' or '-', line) for each line added or removed: a proposal's lesson text."""
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = str(before.get(key, "")).splitlines(), str(after.get(key, "")).splitlines()
        if a == b:
            continue
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag != "equal":
                out += [(key, "-", line) for line in a[i1:i2]] + [(key, "+", line) for line in b[j1:j2]]
    return out


def generation_row(store, run_id: int, index: int) -> dict:
    parent = g.alias("parent")
    with store.engine.connect() as conn:
        row = conn.execute(select(g.c.id, g.c.index, g.c.parent_id, parent.c.index, g.c.prompt_version,
                                  g.c.weights_version, g.c.status, g.c.metrics, g.c.timings, g.c.seeds,
                                  g.c.error, cast(g.c.created_at, String), cast(g.c.committed_at, String),
                                  g.c.state_artifact)
                           .select_from(g.outerjoin(parent, parent.c.id == g.c.parent_id))
                           .where(g.c.run_id == run_id, g.c.index == index)).first()
        if row is None:
            raise LineageError(f"unknown generation index {index}")
        kids = list(conn.scalars(select(g.c.index).where(g.c.parent_id == row[0]).order_by(g.c.index)))
    keys = ("id", "index", "parent_id", "parent_index", "prompt_version", "weights_version", "status", "metrics",
            "timings", "seeds", "error", "created_at", "committed_at", "state_artifact")
    return {**dict(zip(keys, row, strict=True)), "children": kids}


def prompt_components(store, pvid: str | None) -> dict:
    if not pvid:
        return {}
    with store.engine.connect() as conn:
        return conn.scalar(select(pv.c.components).where(pv.c.id == pvid)) or {}


def weights_row(store, wvid: str | None) -> dict | None:
    if not wvid:
        return None
    with store.engine.connect() as conn:
        row = conn.execute(select(wv.c.id, wv.c.parent, wv.c.kind, wv.c.base_model, wv.c.artifact_sha,
                                  wv.c.weights_sha256, wv.c.stats).where(wv.c.id == wvid)).first()
    return None if row is None else dict(row._mapping)


def generation_calls(store, gid: int) -> list[dict]:
    """The generation's LM calls (no request bodies) with the prompt versions each one proposed."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(call.c.id, call.c.role, call.c.model, call.c.tokens, call.c.latency_s,
                                   call.c.error, call.c.request_hash).where(call.c.generation_id == gid)
                            .order_by(call.c.id)).all()
        made: dict[int, list[dict]] = {}
        q = (select(link.c.lm_call_id, pv.c.id, pv.c.proposed_by, pv.c.meta).join(pv, pv.c.id == link.c.prompt_version)
             .where(link.c.lm_call_id.in_([row[0] for row in rows])))
        for cid, pid, how, meta in conn.execute(q):
            made.setdefault(cid, []).append({"id": pid, "proposed_by": how, "meta": meta or {}})
    return [{**dict(row._mapping), "proposals": made.get(row[0], [])} for row in rows]


def lm_call(store, cid: int) -> dict:
    with store.engine.connect() as conn:
        row = conn.execute(select(call.c.id, call.c.generation_id, call.c.role, call.c.model, call.c.request,
                                  call.c.response, call.c.error, call.c.tokens, call.c.latency_s,
                                  call.c.request_hash, cast(call.c.created_at, String), g.c.run_id, g.c.index)
                           .outerjoin(g, g.c.id == call.c.generation_id).where(call.c.id == cid)).first()
        if row is None:
            raise LineageError(f"unknown lm call {cid}")
        made = list(conn.execute(select(pv.c.id, pv.c.proposed_by, pv.c.meta).join(link, link.c.prompt_version
                                                                                   == pv.c.id)
                                 .where(link.c.lm_call_id == cid)).all())
    return {**dict(row._mapping), "proposals": [{"id": a, "proposed_by": b, "meta": m or {}} for a, b, m in made]}


ROLLOUT_FILTERS = ("task", "cls", "passed", "purpose", "pv")


def rollout_filters(store, gid: int) -> dict[str, list]:
    """The values a generation's rollouts take, for the filter menus (one GROUP BY each)."""
    with store.engine.connect() as conn:
        def distinct(col):
            return [v for v in conn.scalars(select(col).where(r.c.generation_id == gid).group_by(col)
                                            .order_by(col)) if v is not None]
        return {"task": distinct(r.c.task_id), "cls": distinct(r.c.error_class), "purpose": distinct(r.c.purpose)}


def rollouts_page(store, gid: int, filters: dict[str, Any], offset: int = 0, limit: int = 25
                  ) -> tuple[list[dict], int]:
    """One page of a generation's rollouts, filtered by task, failure class, pass/fail and purpose."""
    cond = [r.c.generation_id == gid]
    if filters.get("task"):
        cond.append(r.c.task_id == filters["task"])
    if filters.get("cls"):
        cond.append(r.c.error_class == filters["cls"] if filters["cls"] != "-" else r.c.error_class.is_(None))
    if filters.get("passed") in ("pass", "fail"):
        cond.append(r.c.passed.is_(filters["passed"] == "pass"))
    if filters.get("purpose"):
        cond.append(r.c.purpose == filters["purpose"])
    if filters.get("pv"):  # the rollouts under one prompt version (a proposal's evaluation)
        cond.append(r.c.prompt_version == filters["pv"])
    cols = (r.c.id, r.c.task_id, r.c.group.label("group"), r.c.sample_index, r.c.purpose, r.c.prompt_version, r.c.reward,
            r.c.advantage, r.c.passed, r.c.error_class, r.c.completion, r.c.trace, r.c.stages, r.c.hack_flags,
            r.c.truncated, r.c.turns)
    with store.engine.connect() as conn:
        total = conn.scalar(select(func.count()).select_from(r).where(*cond))
        rows = conn.execute(select(*cols).where(*cond).order_by(r.c.id).offset(offset).limit(limit)).all()
    return [dict(row._mapping) for row in rows], int(total or 0)


def rollout_counts(store, gid: int) -> dict[str, dict]:
    """Per purpose: rollouts, passed."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(r.c.purpose, func.count(), func.sum(cast(r.c.passed, Integer)))
                            .where(r.c.generation_id == gid).group_by(r.c.purpose)).all()
    return {p: {"n": n, "passed": int(k or 0)} for p, n, k in rows}

