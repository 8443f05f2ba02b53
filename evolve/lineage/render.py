"""Human renderings of lineage data (plain text, so 10,000 generations print in milliseconds).

The tree keeps a linear chain of generations at one indentation and indents only at
branch points, like ``git log --graph``: a Rich ``Tree`` nests every child, which
for a 1,000-generation chain means 1,000 levels of indentation.
"""

from __future__ import annotations

import math

from evolve.util.text import one_line

_PREFERRED = ("heldout.pass@1", "train_reward", "zero_variance_fraction", "pass@1", "pass", "reward",
              "accuracy", "score")
# Per-class counts and timings are detail for `show`, not key metrics for a one-line summary.
_DETAIL = ("failure_classes", "attribution.classes", "timings", "routing.", "update.")


def flat_metrics(metrics: dict, prefix: str = "") -> dict:
    """Nested metric dicts flattened to dotted names: {"heldout": {"pass@1": x}} -> {"heldout.pass@1": x}."""
    if not any(isinstance(v, dict) for v in metrics.values()):
        return metrics if not prefix else {f"{prefix}{k}": v for k, v in metrics.items()}
    out = {}
    for k, v in metrics.items():
        if isinstance(v, dict):
            out.update(flat_metrics(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def pick_metrics(gens: list[dict], limit: int = 3) -> list[str]:
    """Up to ``limit`` numeric metric names (dotted for nested ones), held-out pass rates first."""
    keys: dict[str, None] = {}
    seen: set[tuple] = set()  # generations mostly share one metric layout: look at each layout once
    for g in gens:
        layout = tuple(g["metrics"])
        if layout in seen:
            continue
        seen.add(layout)
        for k, v in flat_metrics(g["metrics"]).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not any(d in k for d in _DETAIL):
                keys.setdefault(k)

    def rank(k: str) -> tuple:
        low = k.lower()
        return (next((i for i, p in enumerate(_PREFERRED) if p in low), len(_PREFERRED)), k)

    return sorted(keys, key=rank)[:limit]


def fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def short(h: str | None, n: int = 8) -> str:
    return h[:n] if h else "-"


def _label(g: dict, metric_keys: list[str], parent: dict | None) -> str:
    parts = [g["name"]]
    if g["status"] != "committed":
        parts.append(f"[{g['status']}]")
    pv = f"pv {short(g['prompt_version'])}"
    if g["prompt_version"] and (parent is None or parent["prompt_version"] != g["prompt_version"]):
        pv += "*"
    if g["prompt_parents"] > 1 or g["proposed_by"] == "merge":
        pv += " (merge)"
    wv = f"wv {short(g['weights_version'])}"
    if g["weights_version"] and (parent is None or parent["weights_version"] != g["weights_version"]):
        wv += "*"
    parts += [pv, wv]
    flat = flat_metrics(g["metrics"])
    parts += [f"{k}={fmt(flat[k])}" for k in metric_keys if k in flat]
    if len(g["children"]) > 1:
        parts.append(f"<- branch point ({len(g['children'])} children)")
    if g["error"]:
        phase = ((g.get("metrics") or {}).get("failed") or {}).get("phase")
        first = (g["error"].splitlines() or [""])[0]  # one line, escaped: error text can hold model text
        parts.append(f"error{f' in {one_line(phase, 40)}' if phase else ''}: {one_line(first, 80)}")
    return "  ".join(parts)


def lineage_lines(gens: list[dict], metric_keys: list[str]) -> list[str]:
    """The generation tree as text lines; '*' marks a version that changed from the parent."""
    by_id = {g["id"]: g for g in gens}
    kids: dict[int, list[dict]] = {}
    roots = []
    for g in gens:
        if g["parent_id"] in by_id:
            kids.setdefault(g["parent_id"], []).append(g)
        else:
            roots.append(g)
    lines: list[str] = []
    stack = [(r, "", "") for r in reversed(roots)]
    while stack:  # iterative: a 10,000-deep chain must not hit the recursion limit
        g, lead, cont = stack.pop()
        lines.append(lead + _label(g, metric_keys, by_id.get(g["parent_id"])))
        ch = kids.get(g["id"], [])
        if len(ch) == 1:
            stack.append((ch[0], cont, cont))
        else:
            for i in reversed(range(len(ch))):
                last = i == len(ch) - 1
                stack.append((ch[i], cont + ("└─ " if last else "├─ "), cont + ("   " if last else "│  ")))
    return lines


def summary_line(run: str, gens: list[dict]) -> str:
    n = {s: sum(g["status"] == s for g in gens) for s in ("committed", "pending", "failed")}
    branches = sum(len(g["children"]) > 1 for g in gens)
    return (f"run {run}: {len(gens)} generations ({n['committed']} committed, {n['pending']} pending, "
            f"{n['failed']} failed), {branches} branch points")
