"""`evolve report RUN --out DIR`: PNG plots and a Markdown summary of a run."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from evolve.errors import EvolveError
from evolve.util.atomic import atomic_write_text


def _committed(store, run: str) -> list[dict]:
    gens = [g for g in store.lineage(run) if g["status"] == "committed"]
    if not gens:
        raise EvolveError(f"run {run} has no committed generation")
    return sorted(gens, key=lambda g: g["index"])


def _plot_series(ax, gens: list[dict], value, label: str, style: str = "o-") -> None:
    """Plot along parent links, so each branch is its own line."""
    by_id = {g["id"]: g for g in gens}
    for g in gens:
        v = value(g)
        if v is None:
            continue
        p = by_id.get(g["parent_id"])
        pv = value(p) if p else None
        if p is not None and pv is not None:
            ax.plot([p["index"], g["index"]], [pv, v], "-", color="C0", alpha=0.6)
    xs = [g["index"] for g in gens if value(g) is not None]
    ys = [value(g) for g in gens if value(g) is not None]
    ax.plot(xs, ys, style[0], label=label)


def _save(fig, out: Path, name: str) -> Path:
    path = out / name
    tmp = out / f".{name}.tmp.png"
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    tmp.replace(path)
    return path


def write_report(store, run: str, out: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gens = _committed(store, run)
    files = []

    def metric(*keys):
        def get(g):
            v = g.get("metrics") or {}
            for k in keys:
                if not isinstance(v, dict) or k not in v:
                    return None
                v = v[k]
            return v
        return get

    fig, ax = plt.subplots(figsize=(7, 4))
    _plot_series(ax, gens, metric("train_reward"), "train reward")
    ax.set(xlabel="generation", ylabel="mean train reward", title=f"{run}: train reward")
    files.append(_save(fig, out, "train_reward.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    ks = sorted({k for g in gens for k in (metric("heldout")(g) or {}) if k.startswith("pass@")},
                key=lambda k: int(k.split("@")[1]))
    for i, k in enumerate(ks):
        vals = [(g["index"], metric("heldout", k)(g)) for g in gens]
        ax.plot([x for x, _ in vals], [y for _, y in vals], "o-", color=f"C{i}", label=f"held-out {k}")
    ax.set(xlabel="generation", ylabel="pass@k (unbiased)", title=f"{run}: held-out pass@k", ylim=(0, 1))
    ax.legend()
    files.append(_save(fig, out, "heldout_passk.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    _plot_series(ax, gens, metric("zero_variance_fraction"), "zero-variance groups")
    ax.set(xlabel="generation", ylabel="fraction of groups", title="zero-variance groups (no GRPO signal)",
           ylim=(0, 1))
    files.append(_save(fig, out, "zero_variance.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    idx = [g["index"] for g in gens if metric("attribution")(g)]
    dw = [metric("attribution", "delta_weights")(g) for g in gens if metric("attribution")(g)]
    dp = [metric("attribution", "delta_prompt")(g) for g in gens if metric("attribution")(g)]
    ax.bar(idx, dw, label="weights (GRPO)", color="C0")
    ax.bar(idx, dp, bottom=[max(0.0, w) if p >= 0 else min(0.0, w) for w, p in zip(dw, dp, strict=True)],
           label="prompt (reflection)", color="C1")
    ax.axhline(0, color="black", lw=0.8)
    ax.set(xlabel="generation", ylabel="Δ held-out pass@1", title="contribution of each lever")
    ax.legend()
    files.append(_save(fig, out, "contributions.png"))

    files.append(_plot_prompt_lineage(plt, store, gens, out))
    files.append(_write_summary(run, gens, out))
    plt.close("all")
    return files


def _plot_prompt_lineage(plt, store, gens: list[dict], out: Path) -> Path:
    """Prompt versions as nodes (x = first generation using it), edges to their parents."""
    first_seen: dict[str, int] = {}
    for g in gens:
        first_seen.setdefault(g["prompt_version"], g["index"])
    nodes = dict(first_seen)
    for pv in store.prompt_versions(gens[0]["name"].rsplit(":", 1)[0]):  # every proposal tried, too
        nodes.setdefault(pv.id, int((pv.meta or {}).get("generation", 0)))
    edges = [(parent, pv) for pv in nodes for parent in store.prompt_parents(pv)]
    for parent, pv in edges:
        nodes.setdefault(parent, max(0, nodes[pv] - 1))
    rows: dict[int, int] = defaultdict(int)
    pos = {}
    for pv, x in sorted(nodes.items(), key=lambda kv: kv[1]):
        pos[pv] = (x, rows[x])
        rows[x] += 1
    fig, ax = plt.subplots(figsize=(8, 3 + 0.3 * max(rows.values(), default=1)))
    for a, b in edges:
        if a in pos and b in pos:
            ax.annotate("", xy=pos[b], xytext=pos[a], arrowprops={"arrowstyle": "->", "color": "gray"})
    for pv, (x, y) in pos.items():
        used = pv in first_seen
        ax.plot(x, y, "o", color="C1" if used else "lightgray", ms=10)
        ax.annotate(pv[:8], (x, y), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7)
    ax.margins(y=0.25)
    ax.set(xlabel="generation", yticks=[], title="prompt lineage (orange: used by a generation; gray: tried)")
    return _save(fig, out, "prompt_lineage.png")


def _version_lines(gens: list[dict]) -> list[str]:
    """Under a verifier version: held-out pass@1 under its augmented tests and under the tasks' own, per
    generation. A gap that grows is the policy learning to pass the weak tests."""
    rows = [(g["index"], m["heldout"]["pass@1"], m["heldout_original"]) for g in gens
            if (m := g.get("metrics") or {}).get("heldout_original")]
    if not rows:
        return []
    lines = ["", "## Held-out under the verifier version and under the tasks' own tests", "",
             "| gen | augmented pass@1 | own tests pass@1 | gap |", "|---|---|---|---|"]
    return lines + [f"| {i} | {aug:.3f} | {o['pass@1']:.3f} | {o['gap']['pass@1']:+.3f} |" for i, aug, o in rows]


def _write_summary(run: str, gens: list[dict], out: Path) -> Path:
    lines = [f"# Run `{run}`", "", "| gen | parent | prompt | weights | train reward | zero-var | held-out pass@1 |"
             " Δ weights | Δ prompt | accepted |", "|---|---|---|---|---|---|---|---|---|---|"]
    by_id = {g["id"]: g for g in gens}
    removed: dict[str, dict[str, int]] = defaultdict(lambda: {"weights": 0, "prompt": 0})
    for g in gens:
        m = g.get("metrics") or {}
        att = m.get("attribution") or {}
        parent = by_id.get(g["parent_id"])
        lines.append(
            f"| {g['index']} | {parent['index'] if parent else '-'} | `{g['prompt_version'][:8]}` | "
            f"`{str(g['weights_version'])[:8]}` | {m.get('train_reward', float('nan')):.3f} | "
            f"{m.get('zero_variance_fraction', float('nan')):.2f} | {m['heldout']['pass@1']:.3f} | "
            f"{att.get('delta_weights', 0):+.3f} | {att.get('delta_prompt', 0):+.3f} | "
            f"{m.get('accepted', 0)}/{m.get('proposals', 0)} |")
        for cls, row in (att.get("classes") or {}).items():
            removed[cls]["weights"] += row["removed_by_weights"]
            removed[cls]["prompt"] += row["removed_by_prompt"]
    first, last = gens[0]["metrics"]["heldout"], gens[-1]["metrics"]["heldout"]
    lines += ["", "## Failure classes on held-out tasks: which lever removed them", "",
              "| class | gen 0 | last | removed by weights | removed by prompt |", "|---|---|---|---|---|"]
    classes = sorted(set(first.get("failure_classes", {})) | set(last.get("failure_classes", {})) | set(removed))
    for cls in classes:
        lines.append(f"| {cls} | {first.get('failure_classes', {}).get(cls, 0)} | "
                     f"{last.get('failure_classes', {}).get(cls, 0)} | {removed[cls]['weights']} | "
                     f"{removed[cls]['prompt']} |")
    lines += _version_lines(gens)
    lines += ["", "Plots: train_reward.png, heldout_passk.png, zero_variance.png, contributions.png, "
              "prompt_lineage.png", ""]
    return atomic_write_text(out / "summary.md", "\n".join(lines))
