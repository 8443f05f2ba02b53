"""Export a run to the tools people already use: JSON Lines (everything) and MLflow (optional extra).

JSONL: one object per line with a ``type`` (run, generation, prompt_version, weights_version,
lm_call, rollout), streamed a batch at a time, so a million-rollout run never sits in memory.

MLflow (``pip install mlflow-skinny``; experimental, see README): the run becomes one MLflow run,
each committed generation a step carrying its numeric metrics, and the run's prompt versions
MLflow prompt versions (one prompt per run, versions in creation order, the evolve hash in tags).
Re-exporting adds no duplicate prompt versions: versions whose hash is already registered are skipped.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator

from sqlalchemy import String, cast, func, select

from evolve.errors import EvolveError
from evolve.lineage import pages
from evolve.lineage import tables as t
from evolve.lineage.render import flat_metrics

BATCH = 1000


# ---- JSON Lines -------------------------------------------------------------------------------

def _rows(conn, query) -> Iterator[dict]:
    for row in conn.execution_options(yield_per=BATCH).execute(query):
        yield dict(row._mapping)


def jsonl_records(store, run_name: str, rollouts: bool = True) -> Iterator[dict]:
    """Every record of ``run_name`` as plain dicts, run first, rollouts last."""
    run = pages.run_row(store, run_name)
    g, pv, wv, call, r = t.generation, t.prompt_version, t.weights_version, t.lm_call, t.rollout
    yield {"type": "run", **{k: run[k] for k in ("id", "name", "config", "created_at", "code_version")}}
    with store.engine.connect() as conn:
        gcols = [c if c.name not in ("created_at", "committed_at") else cast(c, String).label(c.name) for c in g.c]
        for row in _rows(conn, select(*gcols).where(g.c.run_id == run["id"]).order_by(g.c.index)):
            yield {"type": "generation", "name": f"{run_name}:{row['index']}", **row}
        ids = pages._run_prompt_ids(run["id"])
        parents: dict[str, list[str]] = {}
        for child, parent in conn.execute(select(t.prompt_parent.c.child, t.prompt_parent.c.parent)
                                          .where(t.prompt_parent.c.child.in_(select(ids.c.id)))
                                          .order_by(t.prompt_parent.c.position)):
            parents.setdefault(child, []).append(parent)
        for row in _rows(conn, select(pv.c.id, pv.c.components, pv.c.proposed_by, pv.c.meta,
                                      cast(pv.c.created_at, String).label("created_at"))
                         .join(ids, ids.c.id == pv.c.id).order_by(pv.c.created_at, pv.c.id)):
            yield {"type": "prompt_version", **row, "parents": parents.get(row["id"], [])}
        used = select(g.c.weights_version).where(g.c.run_id == run["id"])
        wcols = [c if c.name != "created_at" else cast(c, String).label("created_at") for c in wv.c]
        for row in _rows(conn, select(*wcols).where(wv.c.id.in_(used)).order_by(wv.c.created_at)):
            yield {"type": "weights_version", **row}
        ccols = [c if c.name != "created_at" else cast(c, String).label("created_at") for c in call.c]
        gids = select(g.c.id).where(g.c.run_id == run["id"])
        for row in _rows(conn, select(*ccols).where(call.c.generation_id.in_(gids)).order_by(call.c.id)):
            yield {"type": "lm_call", **row}
        if rollouts:
            rcols = [c.label("group") if c.key == "group" else c for c in r.c]
            for row in _rows(conn, select(*rcols).where(r.c.generation_id.in_(gids)).order_by(r.c.id)):
                yield {"type": "rollout", **row}


def write_jsonl(store, run_name: str, out, rollouts: bool = True) -> dict[str, int]:
    """Write the records to the text stream ``out``; returns counts per type."""
    counts: dict[str, int] = {}
    for rec in jsonl_records(store, run_name, rollouts=rollouts):
        out.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
        counts[rec["type"]] = counts.get(rec["type"], 0) + 1
    return counts


# ---- MLflow -----------------------------------------------------------------------------------

MLFLOW_MISSING = ("MLflow export needs mlflow: pip install mlflow-skinny (experimental here: its metadata "
                  "caps cachetools<8, which conflicts with dspy's cachetools 8)")
_BAD = re.compile(r"[^\w\-. /]")


def metric_name(name: str) -> str:
    """An MLflow-legal metric name: '@' -> '_at_', anything else outside [\\w-. /] -> '_'."""
    return _BAD.sub("_", name.replace("@", "_at_"))


def prompt_name(run_name: str) -> str:
    return "evolve-" + (re.sub(r"[^\w\-.]", "_", run_name) or "run")


def prompt_template(components: dict) -> str:
    """A prompt version as one text: each component under a ``## name`` heading, in stored order."""
    return "\n\n".join(f"## {k}\n{v}" for k, v in components.items())


def _numeric(metrics: dict) -> dict[str, float]:
    out = {}
    for k, v in flat_metrics(metrics or {}).items():
        if isinstance(v, bool):
            v = float(v)
        if isinstance(v, int | float) and math.isfinite(v):
            out[metric_name(k)] = float(v)
    return out


def export_mlflow(store, run_name: str, tracking_uri: str, experiment: str = "evolve", say=print) -> dict:
    """Log ``run_name`` into MLflow at ``tracking_uri``; returns ids and counts."""
    try:
        import mlflow
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise EvolveError(MLFLOW_MISSING) from None
    if tracking_uri.startswith("file:") or "://" not in tracking_uri:
        # MLflow 3 keeps its file store only behind this switch; the user asked for a file store
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    run = pages.run_row(store, run_name)
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    tags = {"evolve.run": run_name, "evolve.code_version": run["code_version"] or "",
            "evolve.mode": str(run["mode"]), "evolve.verifier_isolation": str(run["isolation"] or "not recorded")}
    mrun = client.create_run(exp_id, run_name=run_name, tags=tags)
    rid = mrun.info.run_id
    params = [Param(metric_name(k)[:250], json.dumps(v, default=str)[:6000])
              for k, v in flat_metrics(run["config"]).items()]
    for i in range(0, len(params), 100):
        client.log_batch(rid, params=params[i:i + 100])
    versions = _register_prompts(mlflow, store, run, say)
    n_steps = 0
    batch: list = []
    g = t.generation
    with store.engine.connect() as conn:
        q = (select(g.c.index, g.c.metrics, g.c.prompt_version).where(g.c.run_id == run["id"], g.c.status
                                                                        == "committed").order_by(g.c.index))
        for index, metrics, pvid in conn.execution_options(yield_per=BATCH).execute(q):
            values = _numeric(metrics)
            if pvid in versions:
                values["prompt.mlflow_version"] = float(versions[pvid])
            batch += [Metric(k, v, 0, int(index)) for k, v in values.items()]
            n_steps += 1
            if len(batch) >= 900:
                client.log_batch(rid, metrics=batch)
                batch = []
    if batch:
        client.log_batch(rid, metrics=batch)
    client.log_batch(rid, tags=[RunTag("evolve.generations", str(n_steps))])
    client.set_terminated(rid)
    return {"tracking_uri": tracking_uri, "experiment_id": exp_id, "run_id": rid, "steps": n_steps,
            "prompt": prompt_name(run_name), "prompt_versions": len(versions)}


def _register_prompts(mlflow, store, run: dict, say) -> dict[str, int]:
    """Register the run's prompt versions (oldest first); returns evolve hash -> MLflow version."""
    name = prompt_name(run["name"])
    known: dict[str, int] = {}
    try:
        latest = mlflow.genai.load_prompt(f"prompts:/{name}@latest")
        for v in range(1, int(latest.version) + 1):
            p = mlflow.genai.load_prompt(f"prompts:/{name}/{v}")
            if p.tags.get("evolve.prompt_version"):
                known[p.tags["evolve.prompt_version"]] = v
    except Exception:  # noqa: BLE001 - no such prompt yet: every MLflow store says so differently
        pass
    out: dict[str, int] = {}
    for rec in sorted(run_prompt_versions(store, run), key=lambda r: (r["created_at"] or "", r["id"])):
        if rec["id"] in known:
            out[rec["id"]] = known[rec["id"]]
            continue
        meta = rec["meta"] or {}
        lesson = "; ".join(f"{op}{line}" for _, op, line in rec["changes"])[:400]
        tags = {"evolve.prompt_version": rec["id"], "evolve.proposed_by": rec["proposed_by"],
                "evolve.parents": ",".join(rec["parents"]), "evolve.accepted": str(meta.get("accepted", "")),
                "evolve.generation": str(meta.get("generation", ""))}
        p = mlflow.genai.register_prompt(name=name, template=prompt_template(rec["components"]),
                                         commit_message=lesson or rec["proposed_by"], tags=tags)
        out[rec["id"]] = int(p.version)
    say(f"mlflow: {len(out)} prompt versions under prompt {name!r}")
    return out


def run_prompt_versions(store, run: dict) -> Iterator[dict]:
    """The run's prompt versions, a generation page at a time, each once (first page it appears on)."""
    with store.engine.connect() as conn:
        last = conn.scalar(select(func.max(t.generation.c.index)).where(t.generation.c.run_id == run["id"]))
    seen: set[str] = set()
    for lo in range(0, (last or 0) + 1, pages.PAGE):
        for rec in pages.prompt_dag_page(store, run["id"], lo, lo + pages.PAGE):
            if rec["id"] not in seen:
                seen.add(rec["id"])
                yield rec
