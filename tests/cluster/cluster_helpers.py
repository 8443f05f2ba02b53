"""Helpers for the Ray tests: find a local cluster's actor processes (by their Ray process title,
restricted to descendants of the nodes this test session started), and compare verdicts."""

from __future__ import annotations

import os
from pathlib import Path

SLOW_ENV = "EVOLVE_RAY_SLOW"  # the loop-level fault tests run when this is 1 (see README, Scale-out on Ray)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descends_from(pid: int, roots: set[int]) -> bool:
    seen = 0
    while pid and pid > 1 and seen < 64:
        if pid in roots:
            return True
        pid, seen = _parent(pid) or 0, seen + 1
    return False


def actor_pids(cluster, class_name: str) -> list[int]:
    """Pids of live ``ray::<class_name>`` worker processes of ``cluster`` (evolve.cluster.local.LocalCluster)."""
    roots, out = set(cluster.pids), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith(f"ray::{class_name}") and _descends_from(int(entry), roots):
            out.append(int(entry))
    return sorted(out)


def verdicts(results) -> list[dict]:
    """VerifyResults as dicts without wall-clock durations."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "duration_s"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return [strip(r.to_dict()) for r in results]
