"""`evolve diff GEN_A GEN_B`: prompt component diffs, metric deltas, how the two sets of weights relate."""

from __future__ import annotations

import difflib
import math

from sqlalchemy import select

from evolve.lineage import tables as t


def relation(chain_a: list, chain_b: list) -> dict:
    """How two nodes relate given each one's ancestor chain (itself first, root last)."""
    if not chain_a or not chain_b:
        return {"relation": "unknown"}
    a, b = chain_a[0], chain_b[0]
    if a == b:
        return {"relation": "same"}
    if a in chain_b:
        return {"relation": "a_ancestor_of_b", "steps": chain_b.index(a)}
    if b in chain_a:
        return {"relation": "b_ancestor_of_a", "steps": chain_a.index(b)}
    in_b = {x: i for i, x in enumerate(chain_b)}
    for i, x in enumerate(chain_a):
        if x in in_b:
            return {"relation": "common_ancestor", "common": x, "steps_a": i, "steps_b": in_b[x]}
    return {"relation": "unrelated"}


def _steps(n: int) -> str:
    return f"{n} step{'s' * (n != 1)}"


def describe(rel: dict, name=lambda x: str(x)) -> str:
    kind = rel["relation"]
    if kind == "same":
        return "same"
    if kind == "a_ancestor_of_b":
        return f"A is an ancestor of B ({_steps(rel['steps'])})"
    if kind == "b_ancestor_of_a":
        return f"B is an ancestor of A ({_steps(rel['steps'])})"
    if kind == "common_ancestor":
        return (f"common ancestor {name(rel['common'])} (A {_steps(rel['steps_a'])}, "
                f"B {_steps(rel['steps_b'])} from it)")
    return "unrelated" if kind == "unrelated" else "unknown (a generation without weights)"


def component_diffs(comp_a: dict, comp_b: dict, label_a: str, label_b: str) -> dict[str, str]:
    """Unified diff per changed component (a component absent on one side diffs against empty)."""
    out = {}
    for key in sorted(set(comp_a) | set(comp_b)):
        ta, tb = comp_a.get(key, ""), comp_b.get(key, "")
        if ta != tb:
            out[key] = "".join(difflib.unified_diff(
                ta.splitlines(keepends=True), tb.splitlines(keepends=True),
                fromfile=f"{label_a}/{key}", tofile=f"{label_b}/{key}"))
            if not out[key].endswith("\n"):
                out[key] += "\n"
    return out


def metric_deltas(ma: dict, mb: dict) -> list[dict]:
    """One row per metric (nested ones by dotted name), with B - A where both are numbers."""
    from evolve.lineage.render import flat_metrics

    ma, mb = flat_metrics(ma), flat_metrics(mb)
    out = []
    for key in sorted(set(ma) | set(mb)):
        va, vb = ma.get(key), mb.get(key)
        delta = None
        if _num(va) and _num(vb):
            delta = vb - va
        out.append({"name": key, "a": va, "b": vb, "delta": delta})
    return out


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def generation_chain(store, gen) -> list[int]:
    """The generation's id then its ancestors' (one query for the run's parent links)."""
    with store.engine.connect() as conn:
        g = t.generation
        parent = dict(conn.execute(select(g.c.id, g.c.parent_id).where(g.c.run_id == gen.run_id)).all())
    chain, cur = [], gen.id
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = parent.get(cur)
    return chain


def diff_generations(store, a, b) -> dict:
    name_a, name_b = store.generation_name(a), store.generation_name(b)
    comp_a = store.get_prompt_version(a.prompt_version).components if a.prompt_version else {}
    comp_b = store.get_prompt_version(b.prompt_version).components if b.prompt_version else {}
    wrel = relation(store.weights_chain(a.weights_version) if a.weights_version else [],
                    store.weights_chain(b.weights_version) if b.weights_version else [])
    grel = relation(generation_chain(store, a), generation_chain(store, b)) if a.run_id == b.run_id \
        else {"relation": "unrelated"}
    if "common" in grel:
        grel["common"] = store.generation_name(store.get_generation(grel["common"]))
    return {
        "a": name_a, "b": name_b,
        "prompt_version": {"a": a.prompt_version, "b": b.prompt_version,
                           "same": a.prompt_version == b.prompt_version},
        "prompt_diff": component_diffs(comp_a, comp_b, name_a, name_b),
        "metrics": metric_deltas(a.metrics or {}, b.metrics or {}),
        "weights_version": {"a": a.weights_version, "b": b.weights_version, **wrel},
        "generation_relation": grel,
    }
