"""`evolve report RUN --out DIR`: a run's charts as SVG files and a Markdown summary.

The charts are the run page's own (``evolve.ui.views.run_charts`` over ``pages.curves``, drawn by
``evolve.ui.charts``): one plotting path for the browser and for files, no plotting library. A
standalone file gets the small stylesheet the UI's CSS gives the same classes.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from evolve.errors import EvolveError
from evolve.metrics import GenerationMetrics
from evolve.util.atomic import atomic_write_text

# The UI's chart text styles (evolve/ui/static/ui.css), for a file opened on its own.
SVG_STYLE = ("<style>.ctitle{font:600 12px sans-serif;fill:#374151}.tick,.legend{font:10px sans-serif;"
             "fill:#6b7280}</style>")
FILES = {"chart-passk": "heldout_passk.svg", "chart-reward": "train_reward.svg",
         "chart-allfail": "all_fail.svg", "chart-attribution": "attribution.svg"}


def _committed(store, run: str) -> list[dict]:
    gens = [g for g in store.lineage(run) if g["status"] == "committed"]
    if not gens:
        raise EvolveError(f"run {run} has no committed generation")
    return sorted(gens, key=lambda g: g["index"])


def _svg_file(out: Path, name: str, svg: str) -> Path:
    """One chart as a file: the XML namespace and the style, then the chart as the page draws it."""
    head, sep, rest = svg.partition(">")
    if not sep or not head.startswith("<svg"):  # "no data yet": the page's placeholder is not a chart
        svg = f'<svg xmlns="http://www.w3.org/2000/svg" width="460" height="40"><text x="4" y="20">' \
              f'{svg.split(">", 1)[-1].rsplit("<", 1)[0]}</text></svg>'
        head, sep, rest = svg.partition(">")
    return atomic_write_text(out / name, f'<?xml version="1.0" encoding="UTF-8"?>\n{head}>{SVG_STYLE}{rest}\n')


def write_report(store, run: str, out: str | Path) -> list[Path]:
    from evolve.lineage import pages
    from evolve.ui import charts, views

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gens = _committed(store, run)
    row = pages.run_row(store, run)
    files = [_svg_file(out, FILES[cid], str(svg))
             for cid, svg in views.run_charts(pages.curves(store, row["id"], row["ks"]), row["ks"]).items()]
    tree_rows, _ = pages.generations_page(store, row["id"], 0, 1 << 30)
    files.append(_svg_file(out, "generations.svg", str(charts.tree_svg(tree_rows, lambda i: f"#gen-{i}"))))
    files.append(_write_summary(store, run, gens, out, [f.name for f in files]))
    return files


def _prompt_lines(store, run: str, gens: list[dict]) -> list[str]:
    """The prompt versions the run used or tried: first generation, parents (was prompt_lineage.png)."""
    first_seen: dict[str, int] = {}
    for g in gens:
        first_seen.setdefault(g["prompt_version"], g["index"])
    nodes = dict(first_seen)
    for pv in store.prompt_versions(run):  # every proposal tried, too
        nodes.setdefault(pv.id, int((pv.meta or {}).get("generation", 0)))
    lines = ["", "## Prompt lineage", "", "| version | generation | used | parents |", "|---|---|---|---|"]
    for pv, x in sorted(nodes.items(), key=lambda kv: (kv[1], kv[0])):
        parents = ", ".join(f"`{p[:8]}`" for p in store.prompt_parents(pv)) or "-"
        lines.append(f"| `{pv[:8]}` | {x} | {'yes' if pv in first_seen else 'tried'} | {parents} |")
    return lines


def _metrics(gen: dict[str, Any]) -> GenerationMetrics:
    """A stored generation's metrics (any run's, recorded by an older version too: read with defaults)."""
    return gen.get("metrics") or GenerationMetrics()


def _version_lines(gens: list[dict]) -> list[str]:
    """Under a verifier version: held-out pass@1 under its augmented tests and under the tasks' own, per
    generation. A gap that grows is the policy learning to pass the weak tests."""
    rows = [(g["index"], m["heldout"]["pass@1"], m["heldout_original"]) for g in gens
            if (m := _metrics(g)).get("heldout_original")]
    if not rows:
        return []
    lines = ["", "## Held-out under the verifier version and under the tasks' own tests", "",
             "| gen | augmented pass@1 | own tests pass@1 | gap |", "|---|---|---|---|"]
    return lines + [f"| {i} | {aug:.3f} | {o['pass@1']:.3f} | {o['gap']['pass@1']:+.3f} |" for i, aug, o in rows]


def _pass1(m: GenerationMetrics) -> str:
    held = m.get("heldout")
    return f"{held['pass@1']:.3f}" if held else "-"


def _write_summary(store, run: str, gens: list[dict], out: Path, charts: list[str]) -> Path:
    lines = [f"# Run `{run}`", "", *[f"![{Path(c).stem}]({c})" for c in charts], "",
             "| gen | parent | prompt | weights | train reward | zero-var | held-out pass@1 |"
             " Δ weights | Δ prompt | accepted |", "|---|---|---|---|---|---|---|---|---|---|"]
    by_id = {g["id"]: g for g in gens}
    removed: dict[str, dict[str, int]] = defaultdict(lambda: {"weights": 0, "prompt": 0})
    for g in gens:
        m = _metrics(g)
        att = m.get("attribution")
        dw, dp = (att.get("delta_weights", 0), att.get("delta_prompt", 0)) if att else (0, 0)
        parent = by_id.get(g["parent_id"])
        lines.append(
            f"| {g['index']} | {parent['index'] if parent else '-'} | `{g['prompt_version'][:8]}` | "
            f"`{str(g['weights_version'])[:8]}` | {m.get('train_reward', float('nan')):.3f} | "
            f"{m.get('zero_variance_fraction', float('nan')):.2f} | {_pass1(m)} | "
            f"{dw:+.3f} | {dp:+.3f} | "
            f"{m.get('accepted', 0)}/{m.get('proposals', 0)} |")
        for cls, row in ((att.get("classes") if att else None) or {}).items():
            removed[cls]["weights"] += row["removed_by_weights"]
            removed[cls]["prompt"] += row["removed_by_prompt"]
    checked = [g for g in gens if _metrics(g).get("heldout")]  # heldout_each_generation = false
    first, last = _metrics(checked[0])["heldout"], _metrics(checked[-1])["heldout"]
    lines += ["", "## Failure classes on held-out tasks: which lever removed them", "",
              "| class | gen 0 | last | removed by weights | removed by prompt |", "|---|---|---|---|---|"]
    classes = sorted(set(first.get("failure_classes", {})) | set(last.get("failure_classes", {})) | set(removed))
    for cls in classes:
        lines.append(f"| {cls} | {first.get('failure_classes', {}).get(cls, 0)} | "
                     f"{last.get('failure_classes', {}).get(cls, 0)} | {removed[cls]['weights']} | "
                     f"{removed[cls]['prompt']} |")
    lines += _version_lines(gens)
    lines += _prompt_lines(store, run, gens) + [""]
    return atomic_write_text(out / "summary.md", "\n".join(lines))
