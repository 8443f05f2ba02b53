"""benchmarks/ablation.py's discovery figures (issue 38): when a helpful lesson was first looked at and
first promoted, and what share of the challenger looks and samples went to lines that add none."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from evolve.gym.notes import DISTRACTORS, NOTES

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ablation_bench38", REPO / "benchmarks" / "ablation.py")
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


def _look(added: str, decision: str = "active", samples: int = 32) -> dict:
    return {"id": added[:8], "added": added, "decision": decision, "samples": samples}


def test_discovery_reads_first_look_first_promotion_and_unhelpful_share():
    run = {"generations": [
        {"index": 0},
        {"index": 1, "challengers": []},
        {"index": 2, "challengers": [_look(DISTRACTORS[0])]},
        {"index": 3, "challengers": [_look(DISTRACTORS[1] + " / " + NOTES["CMP"], samples=8)]},
        {"index": 4, "challengers": [_look(DISTRACTORS[1])]},
        {"index": 5, "challengers": [_look(NOTES["CMP"], "promoted")]},
    ]}
    got = ab.discovery(run)
    assert got["helpful_first_look_at"] == 3 and got["helpful_first_promoted_at"] == 5
    assert got["looks"] == 4 and got["looks_on_unhelpful"] == 2
    assert got["samples_on_unhelpful_share"] == 64 / (64 + 8 + 32)


def test_discovery_of_a_run_that_never_saw_a_helpful_line():
    run = {"generations": [{"index": 1, "challengers": [_look(DISTRACTORS[2], "retired-losing")]}]}
    got = ab.discovery(run)
    assert got["helpful_first_look_at"] is None and got["helpful_first_promoted_at"] is None
    assert got["samples_on_unhelpful_share"] == 1.0
