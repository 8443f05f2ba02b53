"""What `evolve show` and `evolve diff` print: plain dicts first (the --json form), then Rich."""

from __future__ import annotations

from evolve.errors import LineageError
from evolve.lineage import queries
from evolve.lineage.diff import describe
from evolve.lineage.render import flat_metrics, fmt, short
from evolve.util.text import one_line, terminal_safe


def resolve_and_describe(store, ref: str) -> tuple[str, dict]:
    """``RUN:INDEX`` / id -> a generation; a hex prefix -> a prompt or weights version."""
    ref = ref.strip()
    if ":" in ref or ref.isdigit():
        try:
            return "generation", describe_generation(store, store.resolve_generation(ref))
        except LineageError:
            if ":" in ref or len(ref) < 4:
                raise
    if len(ref) >= 4 and all(c in "0123456789abcdefABCDEF" for c in ref):
        for kind, resolve, fn in (("prompt_version", store.resolve_prompt_version, describe_prompt),
                                  ("weights_version", store.resolve_weights_version, describe_weights)):
            try:
                return kind, fn(store, resolve(ref))
            except LineageError as e:
                if "ambiguous" in str(e):
                    raise
        raise LineageError(f"unknown generation, prompt version or weights version {ref!r}")
    raise LineageError(f"bad reference {ref!r}: expected RUN:INDEX, a generation id or a hash prefix")


def describe_generation(store, g) -> dict:
    parent = store.get_generation(g.parent_id) if g.parent_id is not None else None
    pv = store.get_prompt_version(g.prompt_version) if g.prompt_version else None
    return {
        "id": g.id, "name": store.generation_name(g), "index": g.index, "status": g.status,
        "parent": store.generation_name(parent) if parent else None, "parent_id": g.parent_id,
        "children": [store.generation_name(c) for c in store.children(g.id)],
        "prompt_version": g.prompt_version, "prompt": pv.components if pv else None,
        "prompt_proposed_by": pv.proposed_by if pv else None,
        "weights_version": g.weights_version,
        "weights": _weights_dict(store.get_weights_version(g.weights_version)) if g.weights_version else None,
        "metrics": g.metrics or {}, "timings": g.timings or {}, "seeds": g.seeds or {},
        "state_artifact": g.state_artifact, "rng_artifact": g.rng_artifact,
        "rollouts": queries.rollout_summary(store.engine, g.id), "error": g.error,
        "created_at": _iso(g.created_at), "committed_at": _iso(g.committed_at),
        "verifier_isolation": queries.run_isolation(queries.run_config(store.engine, g.run_id)),
    }


def _weights_dict(w) -> dict:
    return {"id": w.id, "kind": w.kind, "base_model": w.base_model, "parent": w.parent,
            "artifact_sha": w.artifact_sha, "weights_sha256": w.weights_sha256,
            "optimizer_artifact": w.optimizer_artifact, "stats": w.stats or {}, "created_at": _iso(w.created_at)}


def describe_prompt(store, pv) -> dict:
    calls = store.lm_calls_for_prompt(pv.id)
    return {
        "id": pv.id, "components": pv.components, "parents": store.prompt_parents(pv.id),
        "proposed_by": pv.proposed_by, "meta": pv.meta or {}, "created_at": _iso(pv.created_at),
        "used_by": queries.generations_using(store.engine, "prompt_version", pv.id),
        "evidence": challenger_evidence(store, pv.id),
        "lm_calls": [{"id": c.id, "role": c.role, "model": c.model, "tokens": c.tokens, "latency_s": c.latency_s,
                      "error": c.error, "request_hash": c.request_hash,
                      "request_summary": _summary(c.request), "response_summary": _summary(c.response)}
                     for c in calls],
    }


def challenger_evidence(store, pv_id: str) -> list[dict]:
    """Every generation's in-group evidence record for this prompt version as a challenger
    (generation metrics ``challengers``: paired tasks, mean difference, bounds, decision)."""
    from sqlalchemy import String, cast, select

    from evolve.lineage.models import Generation

    with store.session() as s:
        rows = s.scalars(select(Generation).where(Generation.status == "committed",
                                                  cast(Generation.metrics, String).like(f"%{pv_id}%"))).all()
        out = [{"generation": store.generation_name(g), **rec} for g in sorted(rows, key=lambda g: g.id)
               for rec in ((g.metrics or {}).get("challengers") or []) if rec.get("id") == pv_id]
    return out


def _challenger_table(console, records: list[dict], title: str, first: str) -> None:
    from rich.table import Table
    from rich.text import Text

    t = Table(first, "adds", "paired tasks", "mean diff", "bounds", "p / per-look level", "decision", title=title)
    for c in records:
        p = f"{c['p']:.4f} / {c['p_threshold']:.4f}" if c.get("p") is not None else "-"
        t.add_row(Text(str(c.get(first, ""))[:12 if first == "id" else 40]), Text(c.get("added", "")[:50]), str(c["n"]),
                  f"{c['mean_diff']:+.3f}", f"[{c['lower']:+.2f}, {c['upper']:+.2f}]", p, Text(c["decision"]))
    console.print(t)


def describe_weights(store, w) -> dict:
    return {**_weights_dict(w), "ancestry": store.weights_chain(w.id)[1:],
            "used_by": queries.generations_using(store.engine, "weights_version", w.id)}


def _summary(obj, limit: int = 300) -> str:
    """A short readable gist of a request/response: its last message or text field."""
    if obj is None:
        return ""
    text = None
    if isinstance(obj, dict):
        msgs = obj.get("messages")
        if isinstance(msgs, list) and msgs and isinstance(msgs[-1], dict):
            text = str(msgs[-1].get("content", ""))
        for key in ("text", "content", "output", "new_instruction"):
            if text is None and isinstance(obj.get(key), str):
                text = obj[key]
        if text is None and isinstance(obj.get("choices"), list) and obj["choices"]:
            text = str(obj["choices"][0])
    text = " ".join((text if text is not None else str(obj)).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _iso(dt):
    return dt.isoformat() if dt is not None else None


# -- human output ------------------------------------------------------------------------------
def print_human(console, kind: str, info: dict) -> None:
    """Rich output; user text (prompts, metric names) goes in as Text so '[...]' is never markup."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    if kind == "generation":
        console.print(f"[bold]generation {info['name']}[/] (id {info['id']}, {info['status']})")
        console.print(f"parent: {info['parent'] or '-'}   children: {', '.join(info['children']) or '-'}")
        console.print(f"verifier isolation: {info.get('verifier_isolation', 'unrecorded')}", markup=False)
        console.print(f"prompt version: {info['prompt_version'] or '-'} ({info['prompt_proposed_by'] or '-'})")
        for name, text in (info["prompt"] or {}).items():
            console.print(Panel(Text(terminal_safe(text)), title=Text(name), title_align="left"))
        w = info["weights"]
        if w:
            console.print(f"weights version: {w['id']} ({w['kind']} of {w['base_model']}), parent "
                          f"{short(w['parent'])}, checkpoint {short(w['artifact_sha'], 12)}")
        _kv_table(console, "metrics", info["metrics"])
        if info["metrics"].get("challengers"):
            _challenger_table(console, info["metrics"]["challengers"], "challengers (in-group evidence)", "id")
        _kv_table(console, "timings (s)", info["timings"])
        if info["rollouts"]:
            t = Table("purpose", "rollouts", "passed", "mean reward", title="rollouts")
            for p, r in info["rollouts"].items():
                t.add_row(Text(p), str(r["n"]), str(r["passed"]), fmt(r["mean_reward"]))
            console.print(t)
        if info["error"]:
            phase = (info["metrics"].get("failed") or {}).get("phase")
            # One line per field: an error can carry model text, which must not forge a line of output.
            # soft_wrap: never broken at the console's width, so no part of it starts a line of its own.
            console.print(f"error{f' in {one_line(phase, 40)}' if phase else ''}: {one_line(info['error'], 2000)}",
                          markup=False, soft_wrap=True)
    elif kind == "prompt_version":
        console.print(f"[bold]prompt version {info['id']}[/] ({info['proposed_by']})")
        console.print(f"parents: {', '.join(short(p, 12) for p in info['parents']) or '-'}")
        console.print(f"used by: {', '.join(info['used_by'][:20]) or '-'}")
        for name, text in info["components"].items():
            console.print(Panel(Text(terminal_safe(text)), title=Text(name), title_align="left"))
        if info.get("evidence"):
            _challenger_table(console, info["evidence"], "evidence as a challenger", "generation")
        for c in info["lm_calls"]:
            console.print(f"lm call {c['id']} ({c['role']}, {c['model']}, {c['latency_s']:.2f}s, "
                          f"tokens {c['tokens']})", markup=False)
            console.print(f"  request:  {one_line(c['request_summary'] or '', 2000)}", markup=False, soft_wrap=True)
            console.print(f"  response: {one_line(c['response_summary'] or c['error'] or '', 2000)}", markup=False,
                          soft_wrap=True)
    else:
        console.print(f"[bold]weights version {info['id']}[/] ({info['kind']} of {info['base_model']})")
        for key in ("parent", "artifact_sha", "weights_sha256", "optimizer_artifact"):
            console.print(f"{key}: {info[key] or '-'}")
        console.print(f"ancestry: {' <- '.join(short(a) for a in info['ancestry']) or '-'}")
        console.print(f"used by: {', '.join(info['used_by'][:20]) or '-'}")
        _kv_table(console, "training stats", info["stats"])


def _kv_table(console, title: str, d: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    if not d:
        return
    t = Table(title=title)
    t.add_column("name", overflow="ellipsis", no_wrap=True)  # one row per entry: a wrapped cell could start
    t.add_column("value", overflow="ellipsis", no_wrap=True)  # a line with model text (a failed generation's error)
    for k, v in flat_metrics(d).items():
        t.add_row(Text(one_line(k, 200)), Text(one_line(fmt(v), 2000)))
    console.print(t)


def print_diff(console, d: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    console.print(f"[bold]A = {d['a']}   B = {d['b']}[/]")
    pv = d["prompt_version"]
    if pv["same"]:
        console.print(f"prompt: same version {short(pv['a'], 12)}")
    else:
        console.print(f"prompt: {short(pv['a'], 12)} -> {short(pv['b'], 12)}")
        for text in d["prompt_diff"].values():
            console.out(text, end="", highlight=False)
    from evolve.lineage.render import _DETAIL

    t = Table("metric", "A", "B", "B - A", title="metrics (per-class detail and timings: --json)")
    for m in d["metrics"]:
        if any(k in m["name"] for k in _DETAIL) and m["name"] != "heldout.failure_classes":
            continue
        t.add_row(Text(m["name"]), Text(fmt(m["a"])), Text(fmt(m["b"])),
                  "" if m["delta"] is None else f"{m['delta']:+.4g}")
    if d["metrics"]:
        console.print(t)
    w = d["weights_version"]
    console.print(f"weights: {short(w['a'])} vs {short(w['b'])}: {describe(w, lambda x: short(x))}")
    console.print(f"generations: {describe(d['generation_relation'])}")
