"""Stage 2 of the headroom probe (benchmarks/headroom_stage2.py): its effects never count the draw that picked
the candidates, they equal a slow reference over the fresh draws, and a stopped stage 2 continues on another
machine from its files (the names frozen, the draws restored)."""

from __future__ import annotations

import importlib.util
import json
import random
import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def stage2(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("headroom_stage2_bench", REPO / "benchmarks" / "headroom_stage2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import results_io

    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(results_io, "RESULTS_DIR", results)  # write_results' folder
    monkeypatch.setattr(mod, "RESULTS_DIR", results)
    monkeypatch.setattr(mod, "SAMPLES_GZ", results / "stage2_samples.jsonl.gz")
    yield mod
    sys.modules.pop("headroom", None)


def _write(mod, out: Path, name: str, verdicts: dict[str, list[bool]]) -> None:
    rows = [{"candidate": name, "task_id": t, "sample": i, "passed": v}
            for t, vs in verdicts.items() for i, v in enumerate(vs)]
    mod.headroom.records_path(out, name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _world(rng: random.Random, n_tasks: int = 30, n_draws: int = 9):
    seed = {f"T{i}": [rng.random() < 0.5 for _ in range(n_draws)] for i in range(n_tasks)}
    lucky = {t: [True, *vs[1:]] for t, vs in seed.items()}  # won its picking draw everywhere, the seed's after
    other = {t: [v if rng.random() < 0.8 else not v for v in vs] for t, vs in seed.items()}
    return seed, lucky, other


def test_the_picking_draw_never_counts(stage2, tmp_path):
    out = tmp_path / "records"
    out.mkdir()
    seed, lucky, other = _world(random.Random(5))
    for name, v in (("seed", seed), ("lucky", lucky), ("other", other)):
        _write(stage2, out, name, v)
    stage2.summarize(out, ["lucky", "other"], 8)
    rows = {r["name"]: r for r in json.loads((stage2.RESULTS_DIR / f"{stage2.NAME}.json").read_text())
            ["results"]["candidates"]}
    assert rows["lucky"]["diff"] == 0 and rows["lucky"]["tasks"] == 30
    diffs = [statistics.mean(other[t][1:]) - statistics.mean(seed[t][1:]) for t in seed]
    assert rows["other"]["diff"] == pytest.approx(statistics.mean(diffs), abs=1e-4)
    assert rows["other"]["se"] == pytest.approx(statistics.stdev(diffs) / len(diffs) ** 0.5, abs=1e-4)
    import gzip

    with gzip.open(stage2.SAMPLES_GZ, "rt") as f:
        kept = [json.loads(x) for x in f]
    assert len(kept) == 3 * 30 * 8 and min(r["sample"] for r in kept) == 1


def test_a_stopped_stage2_continues_on_another_machine(stage2, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    seed, lucky, other = _world(random.Random(6))
    for name, v in (("seed", seed), ("lucky", lucky), ("other", other)):
        _write(stage2, first, name, v)
        _write(stage2, second, name, {t: vs[:1] for t, vs in v.items()})  # stage 1's draw only
    before = stage2.summarize(first, ["lucky", "other"], 8)
    assert stage2.restore(second) == 3 * 30 * 8
    assert stage2.restore(second) == 0  # nothing twice
    assert stage2.summarize(second, ["lucky", "other"], 8) == before
    # the names are the results file's, not a new pick from stage 1
    assert stage2.frozen_names(5) == ["lucky", "other"]


def test_stage_one_picks_its_best_rows_in_order(stage2):
    stage1 = {"results": {"candidates": [{"name": n} for n in ("a", "b", "c", "d", "e", "f")]}}
    assert stage2.pick(stage1, 5) == ["a", "b", "c", "d", "e"]
