"""Issue 37 item 3: the headroom probe's arithmetic and candidates (benchmarks/headroom.py). The paired effect
is checked against a slow reference, the demonstration sets against the loop's rules for a demonstration
(passing, whole, short, one per task, its own task left out of the comparison), and a probe stopped on one
machine continues on another from the results files alone."""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
import statistics
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("headroom_bench", REPO / "benchmarks" / "headroom.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["headroom_bench"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("headroom_bench", None)


def _seed_components() -> dict:
    return tomllib.loads((REPO / "prompts" / "humaneval.toml").read_text())["components"]


def test_paired_effect_matches_a_slow_reference(bench):
    rng = random.Random(3)
    seed = {f"T{i}": [rng.random() < 0.5 for _ in range(3)] for i in range(40)}
    cand = {t: [v if rng.random() < 0.8 else not v for v in vs] for t, vs in seed.items()}
    cand["only-here"] = [True, True, True]  # a task the seed lacks is not compared
    eff = bench.paired_effect(seed, cand, exclude=["T0", "T1"], family=10)
    tasks = [f"T{i}" for i in range(2, 40)]
    diffs = [statistics.mean(cand[t]) - statistics.mean(seed[t]) for t in tasks]
    se = statistics.stdev(diffs) / len(diffs) ** 0.5
    assert eff["tasks"] == 38
    assert eff["diff"] == pytest.approx(statistics.mean(diffs), abs=1e-4)
    assert eff["se"] == pytest.approx(se, abs=1e-4)
    assert eff["ci95"][0] == pytest.approx(statistics.mean(diffs) - 1.96 * se, abs=2e-4)
    # Bonferroni over 10 candidates: z = 2.807
    assert eff["ci_family"][1] - eff["ci_family"][0] == pytest.approx(2 * 2.807 * se, abs=5e-4)
    assert (eff["tasks_up"], eff["tasks_down"]) == (sum(d > 0 for d in diffs), sum(d < 0 for d in diffs))
    same = sum(a == b for t in tasks for a, b in zip(seed[t], cand[t], strict=True)) / (3 * 38)
    assert eff["same_verdict_share"] == pytest.approx(same, abs=1e-4)


def test_a_task_missing_a_sample_is_left_out(bench):
    records = [{"task_id": "A", "sample": 0, "passed": True}, {"task_id": "A", "sample": 1, "passed": False},
               {"task_id": "B", "sample": 0, "passed": True}, {"task_id": "A", "sample": 2, "passed": True}]
    assert bench.by_task(records, 2) == {"A": [True, False]}
    assert bench.by_task(records, 1) == {"A": [True], "B": [True]}


def test_request_seeds_are_shared_across_candidates_and_distinct_within_one(bench):
    seeds = {bench.request_seed(0, t, s) for t in range(164) for s in range(16)}
    assert len(seeds) == 164 * 16
    assert bench.request_seed(1, 0, 0) not in seeds


def test_the_reflector_lines_are_the_eleven_the_ablation_recorded(bench):
    lines = bench.reflector_lines()
    assert len(lines) == 11 and {src for src, _ in lines} == {"ablation_qwen_humaneval.json"}
    cands = bench.line_candidates(_seed_components())
    assert cands[0]["name"] == "seed" and cands[0]["components"] == _seed_components()
    # every other candidate is the seed plus one line in the lessons component
    for c in cands[1:]:
        assert {k: v for k, v in c["components"].items() if k != "lessons"} == \
            {k: v for k, v in _seed_components().items() if k != "lessons"}
        assert c["components"]["lessons"].strip() and "\n" not in c["components"]["lessons"]
    assert len({c["components"]["lessons"] for c in cands[1:]}) == len(cands) - 1


def _kept_db(kept: Path, run: str, versions: list[tuple[str, str]]) -> None:
    """A real lineage database of ``versions`` ((lessons, proposed_by), each the previous one's child), gzipped
    into ``kept`` as kept_runs.keep leaves it."""
    from evolve.lineage.store import LineageStore

    db = kept.parent / f"{run}.db"
    with LineageStore.open(f"sqlite:///{db}") as store:
        parent = store.put_prompt_version({"system": "S", "lessons": ""})
        for lessons, by in versions:
            parent = store.put_prompt_version({"system": "S", "lessons": lessons}, [parent], proposed_by=by)
    with open(db, "rb") as f, gzip.open(kept / f"{run}.db.gz", "wb") as g:
        g.write(f.read())


def test_pooled_lines_are_what_reflection_added_in_the_kept_databases(bench, tmp_path):
    from pooled_lines import pooled_lines

    kept = tmp_path / "kept"
    kept.mkdir()
    _kept_db(kept, "coupled-sfp-s9", [("Line A.", "reflection"), ("Line A.\nLine B.", "reflection"),
                                      ("From the library.", "library")])
    _kept_db(kept, "prompt-only-sfp-s9", [("Line A.", "reflection"), ("Promoted before.", "library"),
                                          ("Promoted before.\nLine D.", "reflection")])
    _kept_db(kept, "weights-only-s9", [])
    # B's and D's prompts carry their parents' lines: only what each proposal adds, each line once, first writer
    assert pooled_lines(kept) == [("coupled-sfp-s9", "Line A."), ("coupled-sfp-s9", "Line B."),
                                  ("prompt-only-sfp-s9", "Line D.")]
    # the shipped list: the powered ablation's lines, each a candidate named by its text
    cands = [c for c in bench.line_candidates(_seed_components()) if c["kind"] == "pooled"]
    assert len(cands) >= 18 and all((REPO / "benchmarks" / "results" / c["source"]).exists() for c in cands)
    named = {c["name"]: c["components"]["lessons"] for c in cands}
    assert len(named) == len(cands) and all(n.startswith("pooled-") for n in named)


def test_demonstrations_are_whole_passing_samples_of_other_tasks(bench):
    tasks = bench.load_train_tasks()
    by_id = {t.task_id: t for t in tasks}
    long_code = "def f():\n" + "    x = 1\n" * 80
    records = []
    for i, t in enumerate(tasks[:12]):
        code = long_code if i == 5 else f"def {t.entry_point}():\n    return {i}\n"
        records.append({"task_id": t.task_id, "sample": 0, "passed": i % 3 != 0, "truncated": i == 4,
                        "completion": code, "text": f"Here it is.\n```python\n{code}```"})
    allowed = {r["task_id"] for r in records if r["passed"] and not r["truncated"] and r["completion"] != long_code
               and len(by_id[r["task_id"]].meta.get("chat_user") or by_id[r["task_id"]].prompt) <= 600}
    for bare, field, kind in ((False, "text", "demos"), (True, "completion", "demos-bare")):
        cands = bench.demo_candidates(_seed_components(), records, by_id, rng_seed=0, bare=bare)
        assert len(cands) == bench.DEMO_SETS and {c["kind"] for c in cands} == {kind}
        used = [tid for c in cands for tid in c["exclude_tasks"]]
        assert len(used) == len(set(used)) == bench.DEMO_SETS * bench.DEMOS_PER_SET
        assert set(used) <= allowed
        for c in cands:
            for tid in c["exclude_tasks"]:
                done = next(r for r in records if r["task_id"] == tid)
                assert done[field].strip() in c["components"]["demos"]
            # the loop's demonstrations are the whole reply, fenced as the prompt asks; bare ones are not
            assert ("Solution:\nHere it is.\n```python" in c["components"]["demos"]) is (not bare)


def test_a_stopped_probe_continues_on_a_new_machine(bench, tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(bench, "RESULTS_DIR", results)
    frozen = [{"name": "seed", "kind": "seed", "source": "x", "components": {"system": "s"}},
              {"name": "demos-0", "kind": "demos", "source": "y", "components": {"system": "s", "demos": "d"},
               "exclude_tasks": ["HumanEval/0"]}]
    (results / "headroom_humaneval.json").write_text(json.dumps({"results": {"frozen": frozen}}))
    rows = [{"candidate": c, "task_id": f"HumanEval/{i}", "sample": 0, "passed": True}
            for c in ("seed", "demos-0") for i in range(3)]
    with gzip.open(results / "headroom_humaneval_samples.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    out = tmp_path / "runs"
    out.mkdir()
    assert bench.restore(out)
    assert json.loads((out / "candidates.json").read_text()) == frozen
    assert bench.read_records(out, "demos-0") == rows[3:]
    assert not bench.restore(out)  # a folder with candidates of its own is never overwritten


def test_a_frozen_candidate_keeps_its_text_and_new_ones_are_added(bench, tmp_path):
    from types import SimpleNamespace

    tasks = bench.load_train_tasks()
    seed = _seed_components()
    args = SimpleNamespace(out_dir=tmp_path, seed=0, suite=bench.HUMANEVAL)
    frozen = [{"name": "seed", "kind": "seed", "source": "x", "components": seed},
              {"name": "hand-typemismatch", "kind": "hand", "source": "an older wording",
               "components": {**seed, "lessons": "an older wording"}}]
    (tmp_path / "candidates.json").write_text(json.dumps(frozen))
    rows = [{"task_id": t.task_id, "sample": 0, "passed": True, "truncated": False,
             "completion": f"def {t.entry_point}():\n    return 1\n",
             "text": f"```python\ndef {t.entry_point}():\n    return 1\n```"} for t in tasks[:10]]
    (tmp_path / "seed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cands = bench.frozen_candidates(seed, tasks, args)
    by_name = {c["name"]: c for c in cands}
    assert cands[:2] == frozen  # kept as frozen, first
    assert by_name["hand-typemismatch"]["components"]["lessons"] == "an older wording"
    assert {"demos-0", "demos-1", "demos-bare-0", "demos-bare-1", "reflector-00", "library-00"} <= set(by_name)
    assert len(by_name) == len(cands)
    assert json.loads((tmp_path / "candidates.json").read_text()) == cands


def test_codeio_candidates_change_one_component_of_reasoning_gyms_seed(bench, tmp_path):
    """CodeI/O's seed is reasoning-gym's own system prompt; every candidate changes one component of it, and no
    demonstration set is drawn (its questions are longer than the loop's demonstration field)."""
    from types import SimpleNamespace

    seed = tomllib.loads((REPO / "prompts" / "codeio.toml").read_text())["components"]
    assert "<answer>answer here</answer>" in seed["system"]
    (tmp_path / "seed.jsonl").write_text(json.dumps({"task_id": "codeio/1/output", "sample": 0, "passed": True,
                                                     "truncated": False, "text": "<answer>1</answer>",
                                                     "completion": "1"}) + "\n")
    cands = bench.all_candidates(seed, [], SimpleNamespace(out_dir=tmp_path, seed=0, suite=bench.CODEIO))
    assert cands[0] == {"name": "seed", "kind": "seed", "source": "prompts/codeio.toml", "components": seed}
    assert {c["kind"] for c in cands} == {"seed", "system", "hand"}
    for c in cands[1:]:
        changed = [k for k in seed if c["components"][k] != seed[k]]
        assert changed == (["system"] if c["kind"] == "system" else ["lessons"]), c["name"]
    assert len({c["name"] for c in cands}) == len(cands)
