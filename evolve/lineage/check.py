"""`evolve check`: every artifact hash, parent link and committed-generation invariant.

Pending and failed generations are not violations (a crash leaves pending rows that
resume discards); what a *committed* generation references must all be in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select

from evolve.lineage import queries
from evolve.lineage import tables as t
from evolve.util.hashing import content_hash


@dataclass
class CheckReport:
    violations: list[str] = field(default_factory=list)
    generations: int = 0
    committed: int = 0
    pending: int = 0
    prompt_versions: int = 0
    weights_versions: int = 0
    artifacts: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        return {"ok": self.ok, "violations": self.violations, "generations": self.generations,
                "committed": self.committed, "pending": self.pending, "prompt_versions": self.prompt_versions,
                "weights_versions": self.weights_versions, "artifacts": self.artifacts}


def check(store, run_name: str | None = None) -> CheckReport:
    rep = CheckReport()
    g = t.generation
    with store.engine.connect() as conn:
        runs = {r.id: r.name for r in conn.execute(select(t.run.c.id, t.run.c.name))}
        q = select(g.c.id, g.c.run_id, g.c.parent_id, g.c.index, g.c.status, g.c.prompt_version,
                   g.c.weights_version, g.c.state_artifact, g.c.rng_artifact, g.c.committed_at)
        if run_name is not None:
            run_id = store.run_id(run_name)
            q = q.where(g.c.run_id == run_id)
        gens = {r.id: r for r in conn.execute(q)}
        missing_parents = {r.parent_id for r in gens.values() if r.parent_id is not None} - set(gens)
        gens_all = {}
        if missing_parents:  # parents outside the checked run (a violation, but name them)
            gens_all = {r.id: r for r in conn.execute(
                select(*q.selected_columns).where(g.c.id.in_(missing_parents)))}
        gens_all.update(gens)
        dup = conn.execute(select(g.c.run_id, g.c.index, func.count()).group_by(g.c.run_id, g.c.index)
                           .having(func.count() > 1)).all()
    name = {gid: f"{runs.get(r.run_id, '?')}:{r.index}" for gid, r in gens_all.items()}
    for run_id, index, n in dup:
        if run_name is None or runs.get(run_id) == run_name:
            rep.violations.append(f"{runs.get(run_id)}:{index}: index used by {n} generations")
    rep.generations = len(gens)
    rep.pending = sum(r.status == "pending" for r in gens.values())
    committed = [r for r in gens.values() if r.status == "committed"]
    rep.committed = len(committed)
    _check_generation_links(gens, gens_all, name, rep)
    pvs, wvs = _check_committed_refs(store, committed, name, rep)
    _check_prompt_dag(store, pvs, rep)
    wv_shas = _check_weights(store, wvs, rep)
    cache: dict = {}
    for r in committed:
        refs = [s for s in (r.state_artifact, r.rng_artifact) if s] + wv_shas.get(r.weights_version, [])
        for problem in queries.artifact_problems(store.engine, store.runs_dir, r.run_id, refs, cache):
            rep.violations.append(f"{name[r.id]}: {problem}")
    for w in sorted(set(wv_shas) - wvs):  # ancestors no checked generation uses: any run that recorded them
        for problem in queries.artifact_problems(store.engine, store.runs_dir, -1, wv_shas[w], cache):
            rep.violations.append(f"weights version {w[:12]}: {problem}")
    _check_recorded_artifacts(store, run_name, runs, cache, rep)
    rep.artifacts = len(cache)
    return rep


def _check_recorded_artifacts(store, run_name: str | None, runs: dict, cache: dict, rep: CheckReport) -> None:
    """Every blob the lineage recorded as durable must still be there and intact, referenced or not."""
    from evolve.lineage.artifacts import ArtifactStore

    a = t.artifact
    q = select(a.c.sha, a.c.run_id, a.c.kind).order_by(a.c.run_id, a.c.sha)
    if run_name is not None:
        q = q.where(a.c.run_id == store.run_id(run_name))
    with store.engine.connect() as conn:
        rows = conn.execute(q).all()
    named = " ".join(rep.violations)  # a file of a broken checkpoint is already named by its generation
    for sha, run_id, kind in rows:
        if sha in cache:
            continue
        name = runs.get(run_id, "?")
        cache[sha] = ArtifactStore(store.runs_dir / name / "artifacts").problems(sha, manifest=kind == "manifest")
        rep.violations.extend(f"run {name}: {p}" for p in cache[sha] if sha not in named)


def _check_generation_links(gens: dict, gens_all: dict, name: dict, rep: CheckReport) -> None:
    for gid, r in sorted(gens.items(), key=lambda kv: (kv[1].run_id, kv[1].index)):
        if r.status not in ("pending", "committed", "failed"):
            rep.violations.append(f"{name[gid]}: unknown status {r.status!r}")
        if r.parent_id is None:
            continue
        p = gens_all.get(r.parent_id)
        if p is None:
            rep.violations.append(f"{name[gid]}: parent generation id {r.parent_id} does not exist")
        elif p.run_id != r.run_id:
            rep.violations.append(f"{name[gid]}: parent {name[p.id]} is in another run")
        elif r.status == "committed" and p.status != "committed":
            rep.violations.append(f"{name[gid]}: committed, but its parent {name[p.id]} is {p.status}")
    state: dict[int, int] = {}  # 1 = on the current path, 2 = done
    for start in gens:
        path, cur = [], start
        while cur is not None and cur in gens_all and state.get(cur) is None:
            state[cur] = 1
            path.append(cur)
            cur = gens_all[cur].parent_id
        if cur is not None and state.get(cur) == 1:
            rep.violations.append(f"{name[cur]}: parent links form a cycle")
        for n in path:
            state[n] = 2


def _check_committed_refs(store, committed: list, name: dict, rep: CheckReport):
    with store.engine.connect() as conn:
        pv_ids = set(conn.scalars(select(t.prompt_version.c.id)))
        wv_ids = set(conn.scalars(select(t.weights_version.c.id)))
        r = t.rollout
        ids = [r.id for r in committed]
        used = set()
        for i in range(0, len(ids), 500):
            used |= set(conn.execute(select(r.c.generation_id, r.c.prompt_version, r.c.weights_version)
                                     .distinct().where(r.c.generation_id.in_(ids[i:i + 500]))).all())
    pvs, wvs = set(), set()
    for r in committed:
        if r.committed_at is None:
            rep.violations.append(f"{name[r.id]}: committed without a commit time")
        for what, ref, known, bag in (("prompt", r.prompt_version, pv_ids, pvs),
                                      ("weights", r.weights_version, wv_ids, wvs)):
            if ref is None:
                rep.violations.append(f"{name[r.id]}: committed without a {what} version")
            elif ref not in known:
                rep.violations.append(f"{name[r.id]}: {what} version {ref[:12]} does not exist")
            else:
                bag.add(ref)
    for gid, pv, wv in sorted(used):
        if pv not in pv_ids:
            rep.violations.append(f"{name[gid]}: a rollout names prompt version {pv[:12]}, which does not exist")
        if wv not in wv_ids:
            rep.violations.append(f"{name[gid]}: a rollout names weights version {wv[:12]}, which does not exist")
    return pvs, wvs


def _check_prompt_dag(store, start: set, rep: CheckReport) -> None:
    with store.engine.connect() as conn:
        pv = t.prompt_version
        rows = {r.id: r.components for r in conn.execute(select(pv.c.id, pv.c.components))}
        edges: dict[str, list[str]] = {}
        for child, parent in conn.execute(select(t.prompt_parent.c.child, t.prompt_parent.c.parent)):
            edges.setdefault(child, []).append(parent)
    seen, stack = set(), list(start)
    while stack:
        pv = stack.pop()
        if pv in seen:
            continue
        seen.add(pv)
        if pv not in rows:
            rep.violations.append(f"prompt version {pv[:12]} is a parent but does not exist")
            continue
        if content_hash({"components": rows[pv]}) != pv:
            rep.violations.append(f"prompt version {pv[:12]}: its components do not hash to its id")
        stack.extend(edges.get(pv, []))
    rep.prompt_versions = len(seen)
    color: dict[str, int] = {}
    for root in seen:  # iterative DFS for cycles in the parent DAG
        if color.get(root):
            continue
        stack2 = [(root, iter(edges.get(root, [])))]
        color[root] = 1
        while stack2:
            node, it = stack2[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack2.pop()
            elif color.get(nxt) == 1:
                rep.violations.append(f"prompt version {nxt[:12]}: parent links form a cycle")
            elif not color.get(nxt):
                color[nxt] = 1
                stack2.append((nxt, iter(edges.get(nxt, []))))


def _check_weights(store, start: set, rep: CheckReport) -> dict[str, list[str]]:
    """Walk the weights parent chains (each version once); returns every reached version's own artifacts.

    A checkpoint is complete on its own, so a broken one is charged to the generations that use
    that version, not to its descendants; an ancestor no generation uses is named by itself.
    """
    with store.engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(select(t.weights_version))}
    done: set[str] = set()
    for wv in start:
        path: list[str] = []
        on_path: set[str] = set()
        cur = wv
        while cur is not None and cur not in done:
            if cur in on_path:
                rep.violations.append(f"weights version {cur[:12]}: parent links form a cycle")
                break
            row = rows.get(cur)
            if row is None:
                rep.violations.append(f"weights version {cur[:12]} is a parent but does not exist")
                break
            ident = content_hash({"artifact_sha": row.artifact_sha, "parent": row.parent,
                                  "base_model": row.base_model, "kind": row.kind})
            if ident != cur:
                rep.violations.append(f"weights version {cur[:12]}: its content does not hash to its id")
            path.append(cur)
            on_path.add(cur)
            cur = row.parent
        done.update(path)
    rep.weights_versions = len(done)
    return {w: [s for s in (rows[w].artifact_sha, rows[w].optimizer_artifact) if s] for w in done}
