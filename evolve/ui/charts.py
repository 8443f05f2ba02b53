"""Inline SVG charts rendered on the server: no charting library, no build step, nothing fetched.

Every label goes through ``markupsafe.escape`` (metric and run names are user text). Colours are
SVG presentation attributes, not ``style=``, so the page's Content-Security-Policy can forbid
inline styles.
"""

from __future__ import annotations

from markupsafe import Markup, escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563")


def line_chart(xs: list, series: dict[str, list], title: str, *, y_min: float | None = None,
               y_max: float | None = None, width: int = 460, height: int = 200, chart_id: str = "") -> Markup:
    """A line chart of ``series`` (name -> values aligned with ``xs``; None = gap), with a legend."""
    pad_l, pad_r, pad_t, pad_b = 44, 10, 24, 38
    vals = [v for s in series.values() for v in s if v is not None]
    if not xs or not vals:
        return Markup(f'<div class="nochart" id="{escape(chart_id)}">{escape(title)}: no data yet</div>')
    lo = min(vals) if y_min is None else min(y_min, min(vals))
    hi = max(vals) if y_max is None else max(y_max, max(vals))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    x0, x1 = min(xs), max(xs)
    span = (x1 - x0) or 1

    def px(x):
        return pad_l + (x - x0) / span * (width - pad_l - pad_r)

    def py(y):
        return pad_t + (hi - y) / (hi - lo) * (height - pad_t - pad_b)

    parts = [f'<svg class="chart" id="{escape(chart_id)}" role="img" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
             f'<title>{escape(title)}</title>',
             f'<text x="{pad_l}" y="14" class="ctitle">{escape(title)}</text>']
    for frac in (0, 0.5, 1):
        y = lo + frac * (hi - lo)
        parts.append(f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#e5e7eb"/>'
                     f'<text x="{pad_l - 4}" y="{py(y) + 4:.1f}" text-anchor="end" class="tick">{y:.3g}</text>')
    for x in (x0, x1):
        parts.append(f'<text x="{px(x):.1f}" y="{height - pad_b + 14}" text-anchor="middle" class="tick">'
                     f'{x:.0f}</text>')
    for i, (name, ys) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        pts = [(px(x), py(y), x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if len(pts) > 1:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b, _, _ in pts)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{path}"/>')
        if len(pts) <= 60:  # markers with hover text while they stay readable
            for a, b, x, y in pts:
                parts.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.6" fill="{colour}" class="pt" '
                             f'data-series="{escape(name)}"><title>{escape(name)} @ {x:.0f}: {y:.4g}</title></circle>')
        lx = pad_l + i * 110
        parts.append(f'<rect x="{lx}" y="{height - 14}" width="10" height="3" fill="{colour}"/>'
                     f'<text x="{lx + 14}" y="{height - 10}" class="legend">{escape(name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def tree_svg(rows: list[dict], href) -> Markup:
    """The page's generations as a lane graph: a chain stays in its lane, a fork opens a new one.

    ``rows`` come from ``pages.generations_page`` (index order); ``href(index)`` links a node.
    A parent outside the page is drawn as a stub naming it.
    """
    if not rows:
        return Markup("")
    step, lane_h, pad = 22, 26, 30
    lane: dict[int, int] = {}
    taken: set[int] = set()  # parents whose lane a child already continues
    pos = {row["index"]: i for i, row in enumerate(rows)}
    for row in rows:
        p = row["parent_index"]
        if p in lane and p not in taken:
            lane[row["index"]] = lane[p]
            taken.add(p)
        else:
            lane[row["index"]] = max(lane.values(), default=-1) + 1
    width = pad * 2 + step * (len(rows) - 1) + 40
    height = pad + lane_h * (max(lane.values()) + 1)
    parts = [f'<svg class="tree" id="gen-tree" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             'xmlns="http://www.w3.org/2000/svg"><title>generation tree</title>']

    def xy(index):
        return pad + step * pos[index], pad / 2 + lane_h * lane[index] + 6

    for row in rows:
        x, y = xy(row["index"])
        p = row["parent_index"]
        if p in pos:
            px_, py_ = xy(p)
            parts.append(f'<path d="M{px_:.0f},{py_:.0f} C{px_ + step / 2:.0f},{py_:.0f} {x - step / 2:.0f},{y:.0f} '
                         f'{x:.0f},{y:.0f}" fill="none" stroke="#9ca3af" stroke-width="1.5"/>')
        elif p is not None:
            parts.append(f'<line x1="{x - 14}" y1="{y}" x2="{x}" y2="{y}" stroke="#9ca3af" stroke-dasharray="3 2"/>'
                         f'<text x="{x - 16}" y="{y + 3}" text-anchor="end" class="tick">{p}</text>')
    for row in rows:
        x, y = xy(row["index"])
        branch = len(row["children"]) > 1
        fill = "#dc2626" if row["status"] == "failed" else "#f59e0b" if row["status"] == "pending" else \
            "#7c3aed" if row["prompt_changed"] and row["weights_changed"] else \
            "#16a34a" if row["prompt_changed"] else "#2563eb"
        label = f'{row["index"]}: {row["status"]}' + (f', branch point ({len(row["children"])} children)'
                                                      if branch else "") + (", fork" if row["fork"] else "")
        parts.append(f'<a href="{escape(href(row["index"]))}" class="node" data-index="{row["index"]}">'
                     f'<circle cx="{x}" cy="{y}" r="{7 if branch else 5}" fill="{fill}" '
                     f'stroke="{"#111827" if branch else "white"}" stroke-width="{2 if branch else 1}">'
                     f'<title>{escape(label)}</title></circle></a>')
        if branch or row["fork"] or len(rows) <= 30 or row["index"] % 10 == 0:
            parts.append(f'<text x="{x}" y="{y - 9}" text-anchor="middle" class="tick">{row["index"]}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
