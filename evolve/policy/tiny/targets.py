"""The targets `evolve bootstrap` is held to (issue #4), checked against a bootstrap.json."""

from __future__ import annotations

import os

MAX_WALL_S = 600.0
PASS1_RANGE = (0.15, 0.50)
MIN_RATIO = 2.0
MIN_NOTE_DELTA = 0.05  # a note "measurably" helps: +5 points pass@1 on the tasks its mode applies to


def check_targets(manifest: dict) -> list[dict]:
    """Rows of (name, value, target, ok); ok is None for figures reported without a target."""
    fig, wall = manifest.get("figures") or {}, manifest["timings"]["total_s"]
    t = manifest["timings"]
    load = f"load avg {t.get('loadavg_start', 0):.1f} -> {t.get('loadavg_end', 0):.1f} on {os.cpu_count()} cores"
    rows = [{"name": "wall_s", "value": wall, "target": f"<= {MAX_WALL_S:.0f}", "ok": wall <= MAX_WALL_S,
             "detail": load},
            {"name": "cpu_s", "value": t.get("cpu_s"), "target": "", "ok": None,
             "detail": "CPU seconds of the build process (load-independent)"}]
    if not fig:
        return rows
    k, p1 = fig["k"], fig["pass@1"]
    rows.append({"name": "heldout_pass@1", "value": p1, "target": f"{PASS1_RANGE[0]}..{PASS1_RANGE[1]}",
                 "ok": PASS1_RANGE[0] <= p1 <= PASS1_RANGE[1]})
    rows.append({"name": f"heldout_pass@{k}", "value": fig[f"pass@{k}"], "target": "", "ok": None})
    ratio = fig.get("ratio")
    rows.append({"name": f"pass@{k}/pass@1", "value": ratio, "target": f">= {MIN_RATIO}",
                 "ok": ratio is not None and ratio >= MIN_RATIO})
    rows.append({"name": "all_fail_task_share", "value": fig["all_fail_task_share"], "target": "", "ok": None})
    for name, line in fig["lines"].items():
        if name.startswith("note:"):
            d = line.get("applicable_delta")
            rows.append({"name": f"{name} applicable_delta", "value": d, "line": line["line"],
                         "detail": f"{line.get('applicable_base')} -> {line.get('applicable_with')} "
                                   f"on {line.get('applicable_tasks')} tasks; overall {line['delta']:+.3f}",
                         "target": f">= +{MIN_NOTE_DELTA}", "ok": d is not None and d >= MIN_NOTE_DELTA})
        else:
            rows.append({"name": f"{name} delta", "value": line["delta"], "line": line["line"],
                         "detail": f"pass@1 {line['pass@1']}", "target": "", "ok": None})
    return rows
