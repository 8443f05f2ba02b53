"""LineageStore: the one writer and reader of the lineage database.

Write order is what makes a crash safe: artifacts are durable before their rows,
rows of a generation are added while it is ``pending``, and ``commit_generation``
re-verifies every artifact the generation references before flipping it to
``committed`` in one transaction. Resume reads only committed generations and
``discard_pending`` drops the rest.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, select, update

from evolve.errors import LineageError
from evolve.lineage import db as dbmod
from evolve.lineage import queries
from evolve.lineage import tables as t
from evolve.lineage.artifacts import ArtifactStore
from evolve.lineage.tables import utcnow
from evolve.util.hashing import content_hash

if TYPE_CHECKING:  # the ORM is imported on first use: `evolve lineage` and `check` never need it
    from sqlalchemy.orm import Session

    from evolve.lineage.models import Generation, LMCall, PromptVersion, RolloutRecord, Run, WeightsVersion

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class LineageStore:
    """Open with :meth:`open`; every method runs in its own short transaction."""

    def __init__(self, engine, target: dbmod.Target):
        self.engine = engine
        self.target = target
        self._sessionmaker = None

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, url: str | None = None, *, create: bool = True, auto_upgrade: bool = True) -> LineageStore:
        """Open (``--db`` / ``$EVOLVE_DB`` / ``sqlite:///runs/lineage.db``).

        ``create``: make a missing SQLite file (and its folder) and migrate it to head.
        ``auto_upgrade``: migrate an older schema; without it an older schema is a
        LineageError telling the user to run ``evolve db upgrade``. Inspection commands
        pass ``create=False, auto_upgrade=False`` and so never write.
        """
        target = dbmod.resolve_url(url)
        path = target.sqlite_path
        if path is not None and not path.exists():
            if not create:
                raise LineageError(f"no lineage database at {path}")
            path.parent.mkdir(parents=True, exist_ok=True)
        elif path is not None and path.is_dir():
            raise LineageError(f"{path} is a folder, not a lineage database")
        engine = dbmod.make_engine(target)
        def must_migrate() -> bool:
            rev = dbmod.current_revision(engine, target)
            return dbmod.check_revision(rev, target, auto_upgrade=auto_upgrade or (create and rev is None))

        try:
            if must_migrate():
                with dbmod.migration_lock(target):  # another process may be migrating it right now: look again
                    if must_migrate():
                        dbmod.upgrade(engine, target)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, target)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def _session(self):
        if self._sessionmaker is None:
            from sqlalchemy.orm import sessionmaker

            self._sessionmaker = sessionmaker(self.engine, expire_on_commit=False)
        return self._sessionmaker

    def session(self) -> Session:
        return self._session()

    @property
    def runs_dir(self) -> Path:
        """Folder for run outputs: the SQLite file's folder, else ``$EVOLVE_RUNS_DIR``, else ./runs."""
        if self.target.sqlite_path is not None:
            return self.target.sqlite_path.parent
        return Path(os.environ.get("EVOLVE_RUNS_DIR") or "runs").absolute()

    def run_lock(self, run_name: str):
        """Context manager: this process is the run's only writer for the block (evolve.lineage.lease)."""
        from evolve.lineage.lease import run_lock

        return run_lock(self, run_name)

    def artifacts(self, run_name: str) -> ArtifactStore:
        run_id = self.run_id(run_name)

        def record(sha: str, kind: str, size: int) -> None:
            with self.engine.begin() as conn:
                queries.insert_ignore(conn, t.artifact,
                                      {"sha": sha, "run_id": run_id, "kind": kind, "size": size,
                                       "created_at": utcnow()})

        return ArtifactStore(self.runs_dir / run_name / "artifacts", on_durable=record)

    # -- runs and tasks ----------------------------------------------------------------------
    def create_run(self, name: str, config: dict | None = None) -> Run:
        from evolve.lineage.models import Run
        from evolve.util.repro import code_version, package_versions

        if not _RUN_NAME.match(name) or name.isdigit():
            raise LineageError(f"bad run name {name!r}: use letters, digits, '.', '_' or '-' (not only digits)")
        with self._session.begin() as s:
            if s.scalar(select(Run.id).where(Run.name == name)) is not None:
                raise LineageError(f"run {name!r} already exists")
            run = Run(name=name, config=queries.plain_json(config or {}, "run config"),
                      code_version=code_version(), package_versions=package_versions(), created_at=utcnow())
            s.add(run)
        return run

    def find_run(self, name: str) -> Run | None:
        from evolve.lineage.models import Run

        with self._session() as s:
            return s.scalar(select(Run).where(Run.name == name))

    def get_run(self, name: str) -> Run:
        run = self.find_run(name)
        if run is None:
            raise LineageError(f"unknown run {name!r}")
        return run

    def put_task(self, suite: str, task_id: str, content_hash: str) -> None:
        with self.engine.begin() as conn:
            queries.insert_ignore(conn, t.task,
                                  {"suite": suite, "task_id": task_id, "content_hash": content_hash})

    # -- prompt and weights versions ---------------------------------------------------------
    def put_prompt_version(self, components: dict[str, str], parents: Sequence[str] = (),
                           proposed_by: str = "seed", lm_call_ids: Sequence[int] = (),
                           meta: dict | None = None) -> str:
        """Idempotent by content: a text seen before keeps its first parents (no cycles)."""
        from evolve.lineage.models import PromptLMCall, PromptParent, PromptVersion

        if not isinstance(components, dict) or not all(isinstance(v, str) for v in components.values()):
            raise LineageError("prompt components must be a dict of name -> text")
        pv = content_hash({"components": components})  # == Candidate(components).id
        with self._session.begin() as s:
            if s.get(PromptVersion, pv) is None:
                for p in parents:
                    if s.get(PromptVersion, p) is None:
                        raise LineageError(f"unknown parent prompt version {p[:12]}")
                s.add(PromptVersion(id=pv, components=dict(components), proposed_by=proposed_by,
                                    meta=queries.plain_json(meta or {}, "prompt meta"), created_at=utcnow()))
                s.flush()
                for i, p in enumerate(dict.fromkeys(parents)):
                    if p != pv:
                        s.add(PromptParent(child=pv, parent=p, position=i))
            known = set(s.scalars(select(PromptLMCall.lm_call_id).where(PromptLMCall.prompt_version == pv)))
            for cid in dict.fromkeys(lm_call_ids):
                if cid not in known:
                    s.add(PromptLMCall(prompt_version=pv, lm_call_id=cid))
        return pv

    def get_prompt_version(self, pv: str) -> PromptVersion:
        from evolve.lineage.models import PromptVersion

        with self._session() as s:
            row = s.get(PromptVersion, pv)
        if row is None:
            raise LineageError(f"unknown prompt version {pv[:12]}")
        return row

    def put_weights_version(self, artifact_sha: str | None, parent: str | None, base_model: str,
                            kind: str = "full", optimizer_artifact: str | None = None,
                            stats: dict | None = None, weights_sha256: str | None = None) -> str:
        """Idempotent: id = content_hash of {artifact_sha, parent, base_model, kind}."""
        from evolve.lineage.models import WeightsVersion

        wid = content_hash({"artifact_sha": artifact_sha, "parent": parent, "base_model": base_model,
                            "kind": kind})
        stats = queries.plain_json(stats or {}, "weights stats")
        weights_sha256 = weights_sha256 or stats.get("weights_sha256")
        with self._session.begin() as s:
            if s.get(WeightsVersion, wid) is None:
                if parent is not None and s.get(WeightsVersion, parent) is None:
                    raise LineageError(f"unknown parent weights version {parent[:12]}")
                s.add(WeightsVersion(id=wid, artifact_sha=artifact_sha, weights_sha256=weights_sha256,
                                     parent=parent, base_model=base_model, kind=kind,
                                     optimizer_artifact=optimizer_artifact, stats=stats, created_at=utcnow()))
        return wid

    def get_weights_version(self, wv: str) -> WeightsVersion:
        from evolve.lineage.models import WeightsVersion

        with self._session() as s:
            row = s.get(WeightsVersion, wv)
        if row is None:
            raise LineageError(f"unknown weights version {wv[:12]}")
        return row

    # -- lm calls ----------------------------------------------------------------------------
    def record_lm_call(self, role: str, model: str, request: dict, response: dict | None = None,
                       error: str | None = None, tokens: dict | None = None, latency_s: float = 0.0,
                       generation_id: int | None = None) -> int:
        from evolve.lineage.models import LMCall

        with self._session.begin() as s:
            call = LMCall(role=role, model=model, request=queries.plain_json(request, "lm request"),
                          request_hash=content_hash(request),
                          response=queries.plain_json(response, "lm response"), error=error,
                          tokens=queries.plain_json(tokens or {}, "lm tokens"),
                          latency_s=float(latency_s), generation_id=generation_id, created_at=utcnow())
            s.add(call)
            s.flush()
            return call.id

    def find_lm_call(self, request_hash: str, include_failed: bool = False,
                     generation_id: int | None = None) -> LMCall | None:
        """The most recent successful call with this request hash (the replay cache). With
        ``include_failed``, failed calls count too; with ``generation_id``, that generation's call wins."""
        from evolve.lineage.models import LMCall

        q = select(LMCall).where(LMCall.request_hash == request_hash)
        if not include_failed:
            q = q.where(LMCall.error.is_(None), LMCall.response.is_not(None))
        order = [LMCall.id.desc()]
        if generation_id is not None:
            order.insert(0, (LMCall.generation_id == generation_id).desc())
        with self._session() as s:
            return s.scalar(q.order_by(*order).limit(1))

    # -- generations -------------------------------------------------------------------------
    def begin_generation(self, run_name: str, parent_id: int | None, seeds: dict | None = None) -> int:
        """Insert a pending generation with the next index of the run; returns its id."""
        from evolve.lineage.models import Generation

        run = self.get_run(run_name)
        with self._session.begin() as s:
            if parent_id is not None:
                parent = s.get(Generation, parent_id)
                if parent is None or parent.run_id != run.id:
                    raise LineageError(f"parent generation {parent_id} is not in run {run_name!r}")
                if parent.status != "committed":
                    raise LineageError(f"parent generation {run_name}:{parent.index} is {parent.status}, "
                                       f"not committed")
            nxt = s.scalar(select(func.coalesce(func.max(Generation.index) + 1, 0))
                           .where(Generation.run_id == run.id))
            gen = Generation(run_id=run.id, parent_id=parent_id, index=nxt,
                             seeds=queries.plain_json(seeds or {}, "seeds"),
                             status="pending", metrics={}, timings={}, created_at=utcnow())
            s.add(gen)
            s.flush()
            return gen.id

    def add_rollouts(self, gid: int, rollouts: Iterable) -> int:
        """Bulk-insert :class:`evolve.rollout.Rollout` objects into a pending generation."""
        from evolve.lineage.models import Generation

        rows = [queries.rollout_row(gid, r) for r in rollouts]
        with self.engine.begin() as conn:
            status = conn.scalar(select(Generation.status).where(Generation.id == gid))
            if status is None:
                raise LineageError(f"unknown generation id {gid}")
            if status != "pending":
                raise LineageError(f"generation {gid} is {status}; rollouts go into pending generations")
            if rows:
                conn.execute(insert(t.rollout), rows)
        return len(rows)

    def commit_generation(self, gid: int, prompt_version: str, weights_version: str,
                          state_artifact: str | None = None, metrics: Mapping[str, Any] | None = None,
                          timings: Mapping[str, float] | None = None, rng_artifact: str | None = None) -> Generation:
        """Verify every referenced artifact on disk, then mark the generation committed atomically."""
        from evolve.lineage.models import Generation

        gen = self.get_generation(gid)
        if gen.status != "pending":
            raise LineageError(f"generation {gid} is {gen.status}; only a pending one can be committed")
        self.get_prompt_version(prompt_version)
        wv = self.get_weights_version(weights_version)
        shas = [state_artifact, rng_artifact, wv.artifact_sha, wv.optimizer_artifact]
        t0 = time.perf_counter()
        for problem in queries.artifact_problems(self.engine, self.runs_dir, gen.run_id, [s for s in shas if s]):
            raise LineageError(f"cannot commit generation {gid}: {problem}")
        # The re-hash is bookkeeping too: record it beside the caller's own timings.
        timings = {**(timings or {}), "commit_verify": time.perf_counter() - t0}
        if isinstance((metrics or {}).get("timings"), dict):  # the loop mirrors its timings into metrics
            metrics = {**metrics, "timings": {**metrics["timings"], "commit_verify": timings["commit_verify"]}}
        with self._session.begin() as s:
            n = s.execute(update(Generation).where(Generation.id == gid, Generation.status == "pending").values(
                prompt_version=prompt_version, weights_version=weights_version, state_artifact=state_artifact,
                rng_artifact=rng_artifact, metrics=queries.plain_json(metrics or {}, "metrics"),
                timings=queries.plain_json(timings or {}, "timings"),
                status="committed", committed_at=utcnow())).rowcount
            if n != 1:
                raise LineageError(f"generation {gid} changed while committing")
        return self.get_generation(gid)

    def fail_generation(self, gid: int, error: str, phase: str | None = None, summary: str | None = None) -> None:
        """Mark a pending generation failed (kept for the record; never resumed from). ``error`` may
        hold a traceback after its first line; ``phase`` and the one-line ``summary`` go into its
        metrics as ``failed``, so `lineage` and `show` can say where it died."""
        from evolve.lineage.models import Generation

        first = summary or (str(error).splitlines() or [""])[0]
        with self._session.begin() as s:
            s.execute(update(Generation).where(Generation.id == gid, Generation.status == "pending")
                      .values(status="failed", error=str(error)[:10000],
                              metrics={"failed": {"phase": phase, "error": first[:500]}}))

    def discard_pending(self, run_name: str) -> int:
        """Delete the run's pending generations with their rollouts and lm calls; returns how many."""
        return queries.discard_pending(self.engine, self.run_id(run_name))

    # -- reading -----------------------------------------------------------------------------
    def get_generation(self, gid: int) -> Generation:
        from evolve.lineage.models import Generation

        with self._session() as s:
            gen = s.get(Generation, gid)
        if gen is None:
            raise LineageError(f"unknown generation id {gid}")
        return gen

    def resolve_generation(self, ref: str | int) -> Generation:
        """``RUN:INDEX`` or a numeric id -> Generation; LineageError if unknown."""
        with self._session() as s:
            return queries.resolve_generation(s, ref)

    def generation_name(self, gen: Generation) -> str:
        from evolve.lineage.models import Run

        with self._session() as s:
            return f"{s.scalar(select(Run.name).where(Run.id == gen.run_id))}:{gen.index}"

    def latest_committed(self, run_name: str) -> Generation | None:
        """The committed generation with the highest index (where a plain resume continues)."""
        from evolve.lineage.models import Generation

        run = self.get_run(run_name)
        with self._session() as s:
            return s.scalar(select(Generation).where(Generation.run_id == run.id,
                                                     Generation.status == "committed")
                            .order_by(Generation.index.desc()).limit(1))

    def children(self, gid: int) -> list[Generation]:
        from evolve.lineage.models import Generation

        with self._session() as s:
            return list(s.scalars(select(Generation).where(Generation.parent_id == gid)
                                  .order_by(Generation.index)))

    def rollouts(self, gid: int, purpose: str | None = None) -> list[RolloutRecord]:
        from evolve.lineage.models import RolloutRecord

        q = select(RolloutRecord).where(RolloutRecord.generation_id == gid)
        if purpose is not None:
            q = q.where(RolloutRecord.purpose == purpose)
        with self._session() as s:
            return list(s.scalars(q.order_by(RolloutRecord.id)))

    def prompt_parents(self, pv: str) -> list[str]:
        from evolve.lineage.models import PromptParent

        with self._session() as s:
            return list(s.scalars(select(PromptParent.parent).where(PromptParent.child == pv)
                                  .order_by(PromptParent.position)))

    def lm_calls_for_prompt(self, pv: str) -> list[LMCall]:
        from evolve.lineage.models import LMCall, PromptLMCall

        with self._session() as s:
            return list(s.scalars(select(LMCall).join(PromptLMCall, PromptLMCall.lm_call_id == LMCall.id)
                                  .where(PromptLMCall.prompt_version == pv).order_by(LMCall.id)))

    def prompt_versions(self, run_name: str) -> list[PromptVersion]:
        """Prompt versions the run's generations use, with all their ancestors."""
        run_id = self.run_id(run_name)
        with self._session() as s:
            return queries.prompt_versions(s, run_id)

    def resolve_prompt_version(self, prefix: str) -> PromptVersion:
        from evolve.lineage.models import PromptVersion

        with self._session() as s:
            return queries.resolve_prefix(s, PromptVersion, prefix, "prompt version")

    def resolve_weights_version(self, prefix: str) -> WeightsVersion:
        from evolve.lineage.models import WeightsVersion

        with self._session() as s:
            return queries.resolve_prefix(s, WeightsVersion, prefix, "weights version")

    def weights_chain(self, wv: str) -> list[str]:
        """``wv`` then its parent, grandparent, ... up to the root."""
        return queries.weights_chain(self.engine, wv)

    def list_runs(self) -> list[dict]:
        return queries.list_runs(self.engine)

    def lineage(self, run_name: str) -> list[dict]:
        """Every generation of the run as plain dicts (one query), ordered by index."""
        return queries.lineage(self.engine, self.run_id(run_name), run_name)

    def run_id(self, name: str) -> int:
        """The run's id (Core only); LineageError if unknown."""
        with self.engine.connect() as conn:
            rid = conn.scalar(select(t.run.c.id).where(t.run.c.name == name))
        if rid is None:
            raise LineageError(f"unknown run {name!r}")
        return rid
