"""benchmarks/ablation.py keeps live arms only, and the recorded runs of retired arms still summarise to
the figures their results files (and so the docs) quote. Real results files, real summary code; no runs
are started (a live arm's config is checked as written, the lead's LoopConfig loads it when it runs)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
ABLATION_FILES = sorted(p.name for p in RESULTS.glob("ablation*.json"))


def _load():
    spec = importlib.util.spec_from_file_location("ablation_bench", REPO / "benchmarks" / "ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ab = _load()


def resummarise(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "ablation.py"), "--resummarise", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.parametrize("name", ABLATION_FILES)
def test_every_results_file_resummarises_to_its_recorded_figures(name):
    doc = json.loads((RESULTS / name).read_text())
    headline = doc["args"]["batches"][-1]["args"]["headline_arm"]
    _, figures = ab.summarize(doc["results"]["runs"], headline, doc["results"].get("unfinished", []))
    figures = json.loads(json.dumps(figures))
    assert {k: figures.get(k) for k in doc["figures"]} == doc["figures"]


def test_retired_arms_are_summarised_under_their_roles():
    doc = json.loads((RESULTS / "ablation.json").read_text())
    retired = sorted({r["arm"] for r in doc["results"]["runs"]} - set(ab.ARMS))
    assert {"coupled-ts", "coupled-sf", "coupled-gate-ties", "prompt-only"} <= set(retired)
    table, figures = ab.summarize(doc["results"]["runs"], "coupled-sfp")
    for arm in retired:  # every retired arm gets its row, and a coupled one its comparison
        assert f"{arm.replace('-', '_')}_pass_at_1" in figures
        if ab.arm_role(arm) == "coupled":
            assert table[f"{arm}_minus_best_single"]["best_single"] == "weights-only"


def test_resummarise_fails_naming_a_changed_figure(tmp_path):
    doc = json.loads((RESULTS / "ablation_fresh2.json").read_text())
    assert resummarise(RESULTS / "ablation_fresh2.json").returncode == 0
    doc["figures"]["coupled_minus_best_single"] += 1.0
    (tmp_path / "x.json").write_text(json.dumps(doc))
    proc = resummarise(tmp_path / "x.json")
    assert proc.returncode == 1 and "differs: coupled_minus_best_single" in proc.stderr
    (tmp_path / "y.json").write_text("{}")
    proc = resummarise(tmp_path / "y.json")
    assert proc.returncode == 2 and "not an ablation results file" in proc.stderr and "Traceback" not in proc.stderr


def test_live_arms_defaults_and_roles():
    assert ab.HEADLINE in ab.ARMS and set(ab.DEFAULT_ARMS.split(",")) <= set(ab.ARMS)
    assert {ab.HEADLINE, "weights-only", "prompt-only-sfp", ab.control_of(ab.HEADLINE),
            "coupled-gate"} <= set(ab.DEFAULT_ARMS.split(","))
    assert ab.control_of(ab.HEADLINE) in ab.ARMS
    for name, arm in ab.ARMS.items():  # the name says what the overrides do (summarize() relies on it)
        want = ("single" if arm["mode"] != "coupled" else "control" if arm.get("reward") == "random"
                else "half" if arm.get("max_rollouts") == 512 else "coupled")
        assert ab.arm_role(name) == want, name
    deleted = {"challengers", "challenger_samples", "challenger_pick", "thompson_variance", "thompson_untried_first",
               "evict_margin", "baseline", "promote_test", "selection_score", "gate_rule", "promotion",
               "noninferior_tolerance", "reuse_candidate_rollouts"}
    for arm in ab.ARMS.values():  # the new schema: selection is a table with a type, no deleted option
        assert not deleted & (set(arm) | set(arm.get("selection", {}))), arm
        assert "selection" not in arm or arm["selection"]["type"] in ("in_group", "gate")


def test_unknown_arm_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "ablation.py"), "--arms", "coupled-ts",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 1 and "unknown arm(s) coupled-ts" in proc.stderr and "Traceback" not in proc.stderr


def test_arm_config_nests_selection_and_switches_type(tmp_path):
    base = tmp_path / "base.toml"
    base.write_text('[loop]\nmode = "coupled"\nmax_rollouts = 1024\n'
                    '[loop.selection]\ntype = "in_group"\nevict_below = 0.3\n[loop.prompt]\nmax_lessons = 3\n')
    l3 = tomllib.loads(ab.arm_config(base, "coupled-sfp-l3", tmp_path, None).read_text())["loop"]
    assert l3["selection"] == {"type": "in_group", "evict_below": 0.3, "promote_looks": 3}
    assert l3["heldout_full_at_start"] is False and l3["max_rollouts"] == 1024
    gate = tomllib.loads(ab.arm_config(base, "coupled-gate", tmp_path, 64).read_text())["loop"]
    assert gate["selection"] == ab.GATE and gate["max_rollouts"] == 64  # no in-group key carried over
    demos = tomllib.loads(ab.arm_config(base, "coupled-sfp-demos", tmp_path, None).read_text())["loop"]
    assert demos["prompt"] == {"max_lessons": 3, "demo_challengers": True, "max_demos": 2}  # merged, not replaced
    w = tomllib.loads(ab.arm_config(base, "weights-only", tmp_path, None).read_text())["loop"]
    assert w["mode"] == "weights" and w["heldout_full_at_start"] is True and w["selection"]["type"] == "in_group"


def test_every_live_arm_is_a_valid_loop_config(tmp_path):
    """Each arm's written config loads through the loop's own parser (the schema the runs use)."""
    import tomllib

    from evolve.loop.config import LoopConfig

    for arm in ab.ARMS:
        path = ab.arm_config(REPO / "configs" / "ablation.toml", arm, tmp_path, None)
        cfg = LoopConfig.from_dict(tomllib.loads(path.read_text())["loop"], source=arm)
        assert cfg.selection.type == (ab.ARMS[arm].get("selection") or {"type": "in_group"})["type"]
    gate = LoopConfig.from_toml(ab.arm_config(REPO / "configs" / "ablation.toml", "coupled-gate", tmp_path, None))
    assert (gate.selection.minibatch_tasks, gate.selection.val_tasks, gate.selection.val_samples) == (4, 12, 2)
    def arm(name: str) -> LoopConfig:
        return LoopConfig.from_toml(ab.arm_config(REPO / "configs" / "ablation.toml", name, tmp_path, None))

    # the headline trains under the incumbent's prompt (the default); the arms recorded before pin "sampled"
    assert arm(ab.HEADLINE).update_prompt == arm(ab.control_of(ab.HEADLINE)).update_prompt == "incumbent"
    assert {arm(a).update_prompt for a in ("coupled-sfp", "coupled-sfp-half", "coupled-gate", "random-reward-sfp",
                                           "coupled-sfp-demos")} == {"sampled"}
    looks = LoopConfig.from_toml(ab.arm_config(REPO / "configs" / "ablation.toml", "coupled-sfp-l3", tmp_path, None))
    assert looks.selection.promote_looks == 3 and looks.selection.evict_below == 0.3
