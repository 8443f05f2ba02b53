"""Queries behind LineageStore's read methods and the CLI (Core selects; no ORM churn for big runs).

Each takes what it reads through: an ``Engine`` for Core selects, an ORM ``Session`` where it returns
model objects, never the LineageStore, so ``store.py`` -> ``queries.py`` is the only arrow between them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from sqlalchemy import Integer, String, cast, delete, func, insert, literal, select

from evolve.errors import LineageError
from evolve.lineage import tables as t
from evolve.lineage.artifacts import ArtifactStore

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session


def insert_ignore(conn, table, values: dict) -> None:
    """INSERT that does nothing if the row's key exists (idempotent puts)."""
    dialect = conn.dialect.name
    if dialect in ("sqlite", "postgresql"):
        if dialect == "sqlite":
            from sqlalchemy.dialects import sqlite as mod
        else:
            from sqlalchemy.dialects import postgresql as mod
        conn.execute(mod.insert(table).values(**values).on_conflict_do_nothing())
        return
    keys = [c for c in table.primary_key.columns] or list(table.columns)
    cond = [c == values[c.name] for c in keys if c.name in values]
    if conn.execute(select(func.count()).select_from(table).where(*cond)).scalar() == 0:
        conn.execute(insert(table).values(**values))


def rollout_row(gid: int, r) -> dict:
    """A Rollout as a row of the rollout table."""
    res = r.result
    return {
        "generation_id": gid, "task_id": r.task_id, "group": int(r.group),
        "sample_index": int(r.sample_index), "prompt_version": r.prompt_version,
        "weights_version": r.weights_version, "purpose": r.purpose, "prompt": r.prompt_text or "",
        "completion": r.completion or "", "reward": _finite(r.reward, r),
        "advantage": None if r.advantage is None else plain_json(float(r.advantage), "advantage"),
        "passed": bool(r.passed),
        "error_class": res.error_class if res else None,
        "stages": plain_json(res.to_dict()["stages"], "rollout stages") if res else [],
        "trace": res.trace if res else "", "hack_flags": list(res.hack_flags) if res else [],
        "truncated": bool(getattr(r, "truncated", False)),
        "turns": plain_json([dataclasses.asdict(t) for t in r.turns], "rollout turns") if getattr(r, "turns", None) else None,
        "guidance": list(r.guidance) if getattr(r, "guidance", None) else None,
    }


def _finite(x, r) -> float:
    x = float(x)
    if not math.isfinite(x):
        raise LineageError(f"rollout {r.task_id}#{r.sample_index} has reward {x}; rewards must be finite")
    return x


def artifact_problems(engine: Engine, runs_dir: Path, run_id: int, shas, cache: dict | None = None) -> list[str]:
    """Re-hash each artifact (folders recursively, under ``runs_dir/RUN/artifacts``); one message
    per missing or corrupt one."""
    cache = {} if cache is None else cache
    out = []
    for sha in dict.fromkeys(shas):
        if sha not in cache:
            cache[sha] = _one_artifact(engine, runs_dir, run_id, sha)
        out.extend(cache[sha])
    return out


def _one_artifact(engine: Engine, runs_dir: Path, run_id: int, sha: str) -> list[str]:
    with engine.connect() as conn:
        rows = conn.execute(select(t.artifact.c.run_id, t.artifact.c.kind, t.run.c.name)
                            .join(t.run, t.run.c.id == t.artifact.c.run_id).where(t.artifact.c.sha == sha)).all()
    if not rows:
        return [f"artifact {sha} is referenced but not recorded in the lineage"]
    rows.sort(key=lambda r: r.run_id != run_id)  # the generation's own run first
    problems: list[str] = []
    for row in rows:
        problems = ArtifactStore(runs_dir / row.name / "artifacts").problems(
            sha, manifest=row.kind == "manifest")
        if not problems:
            return []
    return problems


def discard_pending(engine: Engine, run_id: int) -> int:
    with engine.begin() as conn:
        g = t.generation
        gids = list(conn.scalars(select(g.c.id).where(g.c.run_id == run_id, g.c.status == "pending")))
        if not gids:
            return 0
        calls = select(t.lm_call.c.id).where(t.lm_call.c.generation_id.in_(gids))
        conn.execute(delete(t.prompt_lm_call).where(t.prompt_lm_call.c.lm_call_id.in_(calls)))
        conn.execute(delete(t.lm_call).where(t.lm_call.c.generation_id.in_(gids)))
        conn.execute(delete(t.rollout).where(t.rollout.c.generation_id.in_(gids)))
        conn.execute(delete(g).where(g.c.id.in_(gids)))
    return len(gids)


def resolve_generation(s: Session, ref):
    """``RUN:INDEX`` or a numeric id -> Generation, read through the caller's session."""
    from evolve.lineage.models import Generation, Run

    ref = str(ref).strip()
    if ":" in ref:
        run_name, _, idx = ref.rpartition(":")
        if not idx.isdigit():
            raise LineageError(f"bad generation name {ref!r}: expected RUN:INDEX or an id")
        run_id = s.scalar(select(Run.id).where(Run.name == run_name))
        if run_id is None:
            raise LineageError(f"unknown run {run_name!r}")
        gen = s.scalar(select(Generation).where(Generation.run_id == run_id, Generation.index == int(idx)))
        if gen is None:
            raise LineageError(f"unknown generation {ref!r}")
        return gen
    if ref.isdigit():
        gen = s.get(Generation, int(ref))
        if gen is None:
            raise LineageError(f"unknown generation id {ref}")
        return gen
    raise LineageError(f"bad generation name {ref!r}: expected RUN:INDEX or an id")


def resolve_prefix(s: Session, model, prefix: str, what: str):
    prefix = prefix.strip().lower()
    if len(prefix) < 4 or any(c not in "0123456789abcdef" for c in prefix):
        raise LineageError(f"bad {what} {prefix!r}: give at least 4 hex digits of its hash")
    rows = list(s.scalars(select(model).where(model.id.like(prefix + "%")).limit(2)))
    if not rows:
        raise LineageError(f"unknown {what} {prefix}")
    if len(rows) > 1:
        raise LineageError(f"{what} prefix {prefix} is ambiguous; give more digits")
    return rows[0]


def weights_chain(engine: Engine, wv: str) -> list[str]:
    """``wv`` and its ancestors, nearest first: one recursive query, however deep the chain."""
    w = t.weights_version
    with engine.connect() as conn:
        longest = conn.scalar(select(func.count()).select_from(w))  # no chain is longer; a (corrupt) cycle stops
        base = select(w.c.id, w.c.parent, literal(0).label("depth")).where(w.c.id == wv).cte("chain", recursive=True)
        step = (select(w.c.id, w.c.parent, (base.c.depth + 1).label("depth"))
                .join(base, w.c.id == base.c.parent).where(base.c.depth < longest))
        chain_q = base.union_all(step)
        rows = conn.execute(select(chain_q.c.id, chain_q.c.depth).order_by(chain_q.c.depth)).all()
    out, seen = [], set()
    for wid, _ in rows:
        if wid in seen:
            break
        seen.add(wid)
        out.append(wid)
    return out


def prompt_versions(s: Session, run_id: int) -> list:
    """The run's prompt versions and all their ancestors, oldest first (Core selects, then one ORM read)."""
    from evolve.lineage.models import PromptVersion

    g, pp, link, call = t.generation, t.prompt_parent, t.prompt_lm_call, t.lm_call
    frontier = set(s.scalars(select(g.c.prompt_version).where(
        g.c.run_id == run_id, g.c.prompt_version.is_not(None))))
    # proposals the run's reflection calls made, kept or not (the DAG shows what was tried)
    frontier |= set(s.scalars(
        select(link.c.prompt_version).join(call, call.c.id == link.c.lm_call_id)
        .join(g, g.c.id == call.c.generation_id).where(g.c.run_id == run_id)))
    seen: set[str] = set()
    while frontier:
        seen |= frontier
        parents = set(s.scalars(select(pp.c.parent).where(pp.c.child.in_(frontier))))
        frontier = parents - seen
    return list(s.scalars(select(PromptVersion).where(PromptVersion.id.in_(seen))
                          .order_by(PromptVersion.created_at)))


def run_isolation(config) -> str:
    """The verifier isolation level a run recorded in its config ("unrecorded" for older runs)."""
    level = config.get("verifier_isolation") if isinstance(config, dict) else None
    return level if isinstance(level, str) else "unrecorded"


def run_config(engine: Engine, run_id: int) -> dict:
    with engine.connect() as conn:
        config = conn.scalar(select(t.run.c.config).where(t.run.c.id == run_id))
    return config if isinstance(config, dict) else {}


def list_runs(engine: Engine) -> list[dict]:
    g, run = t.generation, t.run
    counts = (select(g.c.run_id, g.c.status, func.count().label("n"), func.max(g.c.index).label("last"))
              .group_by(g.c.run_id, g.c.status))
    with engine.connect() as conn:
        runs = conn.execute(select(run.c.id, run.c.name, run.c.created_at, run.c.code_version, run.c.config)
                            .order_by(run.c.created_at, run.c.id)).all()
        stats: dict[int, dict] = {}
        for row in conn.execute(counts):
            stats.setdefault(row.run_id, {})[row.status] = (row.n, row.last)
    out = []
    for r in runs:
        st = stats.get(r.id, {})
        out.append({
            "name": r.name, "id": r.id, "created_at": _iso(r.created_at), "code_version": r.code_version,
            "generations": sum(n for n, _ in st.values()),
            "committed": st.get("committed", (0, None))[0], "pending": st.get("pending", (0, None))[0],
            "failed": st.get("failed", (0, None))[0], "latest_committed": st.get("committed", (0, None))[1],
            "verifier_isolation": run_isolation(r.config),
        })
    return out


def lineage(engine: Engine, run_id: int, run_name: str) -> list[dict]:
    """All generations of a run, one query, ordered by index.

    Fast path for big runs (10k generations): positional tuples, timestamps as the
    database's text (no datetime parsing), no timings (``show`` has them).
    """
    g, pv, pp = t.generation, t.prompt_version, t.prompt_parent
    n_parents = select(pp.c.child, func.count().label("n")).group_by(pp.c.child).subquery()
    q = (select(g.c.id, g.c.parent_id, g.c.index, g.c.prompt_version, g.c.weights_version, g.c.status,
                g.c.metrics, cast(g.c.created_at, String), cast(g.c.committed_at, String), g.c.error,
                pv.c.proposed_by, n_parents.c.n)
         .select_from(g.outerjoin(pv, pv.c.id == g.c.prompt_version)
                      .outerjoin(n_parents, n_parents.c.child == g.c.prompt_version))
         .where(g.c.run_id == run_id).order_by(g.c.index))
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    names = {r[0]: f"{run_name}:{r[2]}" for r in rows}
    children: dict[int, list[str]] = {}
    for r in rows:
        if r[1] is not None:
            children.setdefault(r[1], []).append(names[r[0]])
    return [{
        "id": gid, "name": names[gid], "index": index,
        "parent": names.get(parent) if parent is not None else None, "parent_id": parent,
        "prompt_version": pvh, "weights_version": wvh, "status": status, "metrics": metrics or {},
        "children": children.get(gid, []), "proposed_by": how, "prompt_parents": n or 0,
        "created_at": created, "committed_at": committed, "error": error,
    } for gid, parent, index, pvh, wvh, status, metrics, created, committed, error, how, n in rows]


def _iso(dt) -> str | None:
    return dt.isoformat() if dt is not None else None


def rollout_summary(engine: Engine, gid: int) -> dict:
    """Per purpose: how many rollouts, how many passed, mean reward (one aggregate query)."""
    r = t.rollout
    q = (select(r.c.purpose, func.count(), func.sum(func.cast(r.c.passed, Integer)), func.avg(r.c.reward))
         .where(r.c.generation_id == gid).group_by(r.c.purpose))
    with engine.connect() as conn:
        return {p: {"n": n, "passed": int(k or 0), "mean_reward": float(m or 0.0)}
                for p, n, k, m in conn.execute(q)}


def generations_using(engine: Engine, column: str, value: str) -> list[str]:
    """Names of generations whose ``column`` (prompt_version or weights_version) equals ``value``."""
    with engine.connect() as conn:
        g = t.generation
        rows = conn.execute(select(t.run.c.name, g.c.index).join(t.run, t.run.c.id == g.c.run_id)
                            .where(g.c[column] == value).order_by(t.run.c.name, g.c.index)).all()
    return [f"{n}:{i}" for n, i in rows]


def plain_json(obj, what: str):
    """``obj`` as plain JSON values, the same on every backend.

    Tuples and sets become lists, numpy scalars Python numbers, pydantic models and dataclasses
    dicts. Non-finite floats become None: PostgreSQL's JSON has no NaN, and a metric that is
    NaN in SQLite but an error in PostgreSQL would make the backends disagree.
    """
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): plain_json(v, what) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        return [plain_json(v, what) for v in items]
    if hasattr(obj, "model_dump"):
        return plain_json(obj.model_dump(mode="json"), what)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return plain_json(dataclasses.asdict(obj), what)
    if hasattr(obj, "item") and hasattr(obj, "dtype"):  # a numpy scalar
        return plain_json(obj.item(), what)
    raise LineageError(f"{what} holds a value of type {type(obj).__name__}, which cannot be stored as JSON")
