"""What each page shows, as plain template contexts built from paged lineage queries.

No view loads a whole run: generations, the prompt DAG and rollouts come a page at a time
(``evolve.lineage.pages``), curves as a few numbers per generation.
"""

from __future__ import annotations

import copy

from markupsafe import Markup

from evolve.errors import LineageError
from evolve.lineage import pages
from evolve.lineage.diff import component_diffs, describe, diff_generations, metric_deltas
from evolve.metrics import GenerationMetrics, HeldoutMetrics
from evolve.ui import charts
from evolve.ui.text import from_form

GEN_PAGE, ROLLOUT_PAGE = 50, 25


def _int(value, default: int = 0, lo: int = 0, hi: int = 10**9) -> int:
    try:
        return max(lo, min(hi, int(value)))
    except (TypeError, ValueError):
        return default


def pager(page: int, total: int, size: int) -> dict:
    last = max(0, (total - 1) // size)
    page = min(page, last)
    return {"page": page, "last": last, "size": size, "total": total, "offset": page * size,
            "first_item": page * size + 1 if total else 0, "last_item": min(total, (page + 1) * size)}


def runs_page(store) -> dict:
    return {"runs": pages.runs_overview(store)}


def run_page(store, name: str, params, url) -> dict:
    run = pages.run_row(store, name)
    _, total = pages.generations_page(store, run["id"], 0, 0)  # how many index slots
    gp = pager(_int(params.get("page"), 0), total, GEN_PAGE)
    rows, _ = pages.generations_page(store, run["id"], gp["offset"], GEN_PAGE)
    dag = pages.prompt_dag_page(store, run["id"], gp["offset"], gp["offset"] + GEN_PAGE)
    curves = list(run_charts(_curves(store, run), run["ks"]).values())
    tree = charts.tree_svg(rows, lambda i: url("generation", run_id=run["id"], index=i))
    wchain = [row for row in rows if row["weights_changed"]]
    return {"run": run, "gens": rows, "gp": gp, "dag": dag, "curves": curves, "tree": tree,
            "weights": wchain}


def run_charts(cv: dict, ks: list[int]) -> dict[str, Markup]:
    """A run's curves (``pages.curves``) as SVG charts by id: the run page shows them and
    ``evolve report`` writes them to files (one plotting path)."""
    s, xs = cv["series"], cv["x"]
    note = f" ({cv['n']} generations, {cv['bucket']} per point)" if cv["bucketed"] else ""
    return {
        "chart-passk": charts.line_chart(xs, {f"pass@{k}": s[f"pass@{k}"] for k in ks}, "held-out pass@k" + note,
                                         y_min=0, y_max=1, chart_id="chart-passk"),
        "chart-reward": charts.line_chart(xs, {"train reward": s["train_reward"]}, "train reward" + note,
                                          y_min=0, chart_id="chart-reward"),
        "chart-allfail": charts.line_chart(xs, {"all-fail share": s["all_fail_share"]},
                                           "all-fail groups (share)" + note, y_min=0, y_max=1,
                                           chart_id="chart-allfail"),
        "chart-attribution": charts.line_chart(xs, {"Δ from weights": s["delta_weights"],
                                                    "Δ from prompt": s["delta_prompt"]},
                                               "attribution of Δ held-out pass@1" + note,
                                               chart_id="chart-attribution"),
    }


_CURVES: dict[tuple, dict] = {}


def _curves(store, run: dict) -> dict:
    """``pages.curves`` (one JSON parse per generation) cached until the run gets a new or changed
    generation: reloading the run page of a 10,000-generation run then costs one indexed lookup."""
    key = (id(store), run["id"], tuple(run["ks"]), pages.run_version(store, run["id"]))
    if key not in _CURVES:
        if len(_CURVES) > 32:
            _CURVES.clear()
        _CURVES[key] = pages.curves(store, run["id"], run["ks"])
    return copy.deepcopy(_CURVES[key])


def generation_page(store, run_name: str, index: int, params, db_arg: str | None) -> dict:
    run = pages.run_row(store, run_name)
    gen = pages.generation_row(store, run["id"], index)
    comps = pages.prompt_components(store, gen["prompt_version"])
    parent_comps = None
    diff = {}
    if gen["parent_index"] is not None:
        parent = pages.generation_row(store, run["id"], gen["parent_index"])
        parent_comps = pages.prompt_components(store, parent["prompt_version"])
        diff = component_diffs(parent_comps, comps, f"{run_name}:{parent['index']}", f"{run_name}:{index}")
    filters = {k: from_form(params.get(k)) for k in pages.ROLLOUT_FILTERS}
    _, total = pages.rollouts_page(store, gen["id"], filters, 0, 0)
    rp = pager(_int(params.get("rpage"), 0), total, ROLLOUT_PAGE)
    rollouts, _ = pages.rollouts_page(store, gen["id"], filters, rp["offset"], ROLLOUT_PAGE)
    metrics: GenerationMetrics = gen["metrics"] or GenerationMetrics()  # older runs too: read with defaults
    db = f" --db {_shell(db_arg)}" if db_arg else ""
    name = f"{run_name}:{index}"
    return {
        "run": run, "gen": gen, "name": name, "components": comps, "diff": diff, "has_parent": parent_comps is not None,
        "weights": pages.weights_row(store, gen["weights_version"]), "metrics": metrics,
        "routing": metrics.get("routing") or {}, "classes": _class_table(metrics),
        "calls": pages.generation_calls(store, gen["id"]), "rollouts": rollouts,
        "proposals": [p for p in pages.prompt_dag_page(store, run["id"], index, index + 1) if p["lm_calls"]], "rp": rp, "filters": filters,
        "choices": pages.rollout_filters(store, gen["id"]), "counts": pages.rollout_counts(store, gen["id"]),
        "commands": [f"evolve resume {_shell(run_name)} --from {_shell(name)}{db}", f"evolve replay {_shell(name)}{db}"],
    }


def _shell(word: str) -> str:
    import shlex

    return shlex.quote(word)


def _class_table(metrics: GenerationMetrics) -> list[dict]:
    """Held-out failure classes with what each lever removed (attribution), one row per class."""
    att, routing = metrics.get("attribution"), metrics.get("routing")
    held = (metrics.get("heldout") or HeldoutMetrics()).get("failure_classes") or {}
    attr = (att.get("classes") if att else None) or {}
    recurring = set((routing.get("recurring_classes") if routing else None) or [])
    names = sorted(set(held) | set(attr) | recurring)
    return [{"name": c, "count": held.get(c), "recurring": c in recurring, **(attr.get(c) or {})} for c in names]


def call_page(store, cid: int) -> dict:
    c = pages.lm_call(store, cid)
    run_name = pages.run_name(store, c["run_id"]) if c["run_id"] is not None else None
    req = c["request"] if isinstance(c["request"], dict) else {}
    data = req.get("dataset") if isinstance(req.get("dataset"), dict) else {}
    groups = [grp for grp in data.get("groups") or [] if isinstance(grp, dict)] if isinstance(data.get("groups"), list) \
        else []
    return {"call": c, "run_name": run_name, "groups": groups,
            "messages": req.get("messages") if isinstance(req.get("messages"), list) else None}


def prompt_page(store, pvid: str) -> dict:
    p = store.resolve_prompt_version(pvid)
    parents = store.prompt_parents(p.id)
    parent_comps = pages.prompt_components(store, parents[0]) if parents else {}
    return {"pv": p, "parents": parents, "diff": component_diffs(parent_comps, p.components or {}, "parent", "this")
            if parents else {}, "calls": [c.id for c in store.lm_calls_for_prompt(p.id)],
            "changes": pages.line_changes(parent_comps, p.components or {}) if parents else []}


def compare_page(store, a_ref: str, b_ref: str) -> dict:
    if not a_ref or not b_ref:
        return {"a_ref": a_ref, "b_ref": b_ref, "d": None}
    a, b = store.resolve_generation(a_ref), store.resolve_generation(b_ref)
    d = diff_generations(store, a, b)
    ca = pages.prompt_components(store, a.prompt_version)
    cb = pages.prompt_components(store, b.prompt_version)
    held_a = ((a.metrics or {}).get("heldout") or {}).get("failure_classes") or {}
    held_b = ((b.metrics or {}).get("heldout") or {}).get("failure_classes") or {}
    classes = [{"name": k, "a": held_a.get(k, 0), "b": held_b.get(k, 0), "delta": held_b.get(k, 0) - held_a.get(k, 0)}
               for k in sorted(set(held_a) | set(held_b))]
    keep = [m for m in metric_deltas(a.metrics or {}, b.metrics or {})
            if not m["name"].startswith(("timings.", "heldout.failure_classes.", "attribution.classes."))]
    return {"a_ref": a_ref, "b_ref": b_ref, "d": d, "ca": ca, "cb": cb, "keys": sorted(set(ca) | set(cb)),
            "classes": classes, "metrics": keep, "weights_rel": describe(d["weights_version"], lambda x: x[:8]),
            "gen_rel": describe(d["generation_relation"])}


def resolve_run_name(store, run_id: int) -> str:
    name = pages.run_name(store, run_id)
    if name is None:
        raise LineageError(f"unknown run id {run_id}")
    return name
