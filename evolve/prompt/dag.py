"""The prompt DAG of a run, read from the lineage (for ``evolve prompts RUN``)."""

from __future__ import annotations

from typing import Any

from evolve.prompt.pareto import mean


def _heldout(metrics: dict) -> float | None:
    h = (metrics or {}).get("heldout")
    if isinstance(h, dict) and isinstance(h.get("pass@1"), (int, float)):
        return float(h["pass@1"])
    return None


def prompt_dag(store: Any, run: str) -> list[dict]:
    """Prompt versions the run's generations used, with their ancestors, oldest first.

    ``score``: mean validation score recorded when the version was accepted (meta ``val``), else the
    held-out pass@1 of the last committed generation that used it; None when neither exists.
    """
    gens = store.lineage(run)
    used: dict[str, list[dict]] = {}
    for g in gens:
        if g["prompt_version"]:
            used.setdefault(g["prompt_version"], []).append(g)
    evidence: dict[str, dict] = {}  # in-group selection: each challenger's latest evidence record
    for g in gens:
        if g["status"] == "committed":
            for rec in (g["metrics"] or {}).get("challengers") or []:
                evidence[rec["id"]] = {**rec, "generation": g["name"]}
    out = []
    for pv in store.prompt_versions(run):
        meta = pv.meta or {}
        val = meta.get("val")
        heldout = [x for g in used.get(pv.id, []) if g["status"] == "committed"
                   for x in [_heldout(g["metrics"])] if x is not None]
        score = mean(val) if isinstance(val, dict) and val else (heldout[-1] if heldout else None)
        out.append({
            "id": pv.id, "parents": store.prompt_parents(pv.id), "proposed_by": pv.proposed_by,
            "kind": meta.get("kind", pv.proposed_by), "rationale": meta.get("rationale", ""),
            "score": score, "heldout_pass@1": heldout[-1] if heldout else None,
            "generations": [g["name"] for g in used.get(pv.id, [])],
            "lm_calls": [c.id for c in store.lm_calls_for_prompt(pv.id)],
            "evidence": evidence.get(pv.id),
        })
    return out


def render_tree(run: str, nodes: list[dict]):
    """A rich Tree: each version under its first parent; merges name their other parents."""
    from rich.tree import Tree

    def label(n: dict) -> str:
        score = "-" if n["score"] is None else f"{n['score']:.3f}"
        gens = ", ".join(n["generations"][:4]) + (" …" if len(n["generations"]) > 4 else "")
        text = f"[bold]{n['id'][:12]}[/bold] {n['proposed_by']} score={score}"
        if len(n["parents"]) > 1:
            text += " merge of " + " + ".join(p[:8] for p in n["parents"])
        if gens:
            text += f"  [dim]gens {gens}[/dim]"
        ev = n.get("evidence")
        if ev:  # in-group selection: paired evidence against the incumbent, as of its last generation
            p = f" p={ev['p']:.4f}/{ev['p_threshold']:.4f}" if ev.get("p") is not None else ""
            text += (f"\n  evidence n={ev['n']} mean diff {ev['mean_diff']:+.3f} bounds [{ev['lower']:+.2f}, "
                     f"{ev['upper']:+.2f}]{p} {ev['decision']} ({ev['generation']})")
        if n["rationale"]:
            text += f"\n[dim]{n['rationale'][:160]}[/dim]"
        return text

    ids = {n["id"] for n in nodes}
    kids: dict[str | None, list[dict]] = {}
    for n in nodes:
        first = next((p for p in n["parents"] if p in ids), None)
        kids.setdefault(first, []).append(n)
    root = Tree(f"prompt versions of run [bold]{run}[/bold] ({len(nodes)})")

    def add(tree, parent_id):
        for n in kids.get(parent_id, []):
            add(tree.add(label(n)), n["id"])

    add(root, None)
    return root
