"""``[loop.selection]`` as a discriminated union, and runs recorded before it existed.

The legacy configs in fixtures/legacy_loop_configs.json were written by evolve 8bc8562 (the last
version with flat selection keys) for three real runs of configs/ci.toml-sized loops: in-group, gate
and weights-only. A run recorded under rules that still exist must resume and replay hash-equal; one
recorded under a deleted rule is refused with one line naming the code version that recorded it.
Real tiny model, real sandbox, real SQLite, the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import evolve_zygote
import pytest

from evolve.errors import ConfigError
from evolve.loop.config import LoopConfig
from evolve.loop.legacy import MOVED, upgrade_recorded

REPO = Path(__file__).resolve().parents[2]
LEGACY = json.loads((Path(__file__).parent / "fixtures" / "legacy_loop_configs.json").read_text())
GATE = {"type": "gate", "minibatch_tasks": 3, "minibatch_samples": 2, "val_tasks": 4, "val_samples": 2}
# The nested equivalent of each legacy run (ci.toml-sized, one generation); those versions trained every
# completion under the prompt it was sampled with.
SAMPLED = {"update_prompt": "sampled"}
EQUIVALENT = {"legacy-ingroup": {"selection": {"type": "in_group"}, **SAMPLED},
              "legacy-gate": {"selection": GATE, **SAMPLED},
              "legacy-weights": {"mode": "weights", **SAMPLED}}


def _new(name: str) -> LoopConfig:
    """(and their demonstration pool, had they had one, counted inside the reflection budget)"""
    cfg = LoopConfig.from_toml(REPO / "configs" / "ci.toml").with_overrides(generations=1, **EQUIVALENT[name])
    return cfg.model_copy(update={"prompt": cfg.prompt.model_copy(update={"demo_budget": "shared"})})


@pytest.mark.parametrize("name", sorted(EQUIVALENT))
def test_a_legacy_config_upgrades_to_the_same_config(name):
    old = LEGACY[name]
    assert isinstance(old["loop"]["selection"], str)  # really the flat format
    got = LoopConfig.from_recorded(old["loop"], recorded_by=old["code_version"])
    want = _new(name)
    if name == "legacy-weights":  # the selection table is ignored without the prompt lever
        got = got.with_overrides(selection=want.selection)
    assert got == want


@pytest.mark.parametrize("key,value", [("promote_test", "betting"), ("challengers", 2), ("baseline", "per_prompt"),
                                       ("selection_score", "reward"), ("thompson_untried_first", True),
                                       ("challenger_samples", 1), ("challenger_pick", "ucb")])
def test_a_legacy_in_group_run_under_a_deleted_rule_is_refused(key, value):
    loop = {**LEGACY["legacy-ingroup"]["loop"], key: value}
    with pytest.raises(ConfigError) as e:
        upgrade_recorded(loop, "run x", "8bc85629dba0")
    msg = str(e.value)
    assert "\n" not in msg and "8bc85629dba0" in msg and key in msg


def test_deleted_rules_that_never_applied_do_not_refuse():
    gate = {**LEGACY["legacy-gate"]["loop"], "promote_test": "betting", "challengers": 2}  # in-group keys
    assert upgrade_recorded(gate, "run x")["selection"]["type"] == "gate"
    weights = {**LEGACY["legacy-weights"]["loop"], "gate_rule": "strict", "baseline": "per_prompt"}
    assert upgrade_recorded(weights, "run x")["mode"] == "weights"
    control = {**LEGACY["legacy-ingroup"]["loop"], "reward": "random", "selection_score": "reward"}
    assert upgrade_recorded(control, "run x")["reward"] == "random"  # the control scored its draw anyway
    with pytest.raises(ConfigError, match="gate_rule"):
        upgrade_recorded({**LEGACY["legacy-gate"]["loop"], "gate_rule": "strict"}, "run x")
    with pytest.raises(ConfigError, match="promotion"):
        upgrade_recorded({**LEGACY["legacy-gate"]["loop"], "promotion": "noninferior"}, "run x")


@pytest.mark.parametrize("table,needle", [
    ({"type": "in_group", "val_tasks": 4}, "'selection.val_tasks': not a setting of type 'in_group' (another type"),
    ({"type": "gate", "promote_alpha": 0.1}, "'selection.promote_alpha': not a setting of type 'gate' (another type"),
    ({"type": "in_group", "challengers": 2}, "unknown key 'selection.challengers'"),
    ({"type": "beam"}, "selection: Input tag 'beam' found using 'type' does not match any of the expected tags"),
    ({"type": "in_group", "promote_alpha": 1.5}, "selection.promote_alpha: Input should be less than 1"),
    ({"type": "gate", "val_samples": 0}, "selection.val_samples: Input should be greater than or equal to 1"),
])
def test_a_selection_key_that_does_nothing_is_an_error(table, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        LoopConfig.from_dict({"selection": table})


def test_a_flat_selection_key_is_an_error():
    with pytest.raises(ConfigError, match=r"unknown key 'val_tasks'; it belongs in loop.selection.val_tasks"):
        LoopConfig.from_dict({"val_tasks": 4})


def test_bad_config_on_the_command_line_is_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[loop]\n[loop.selection]\ntype = "in_group"\nminibatch_tasks = 3\n')
    proc = subprocess.run([sys.executable, "-m", "evolve", "run", "--config", str(bad), "--db",
                           "sqlite:///" + str(tmp_path / "l.db")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "minibatch_tasks" in lines[0] and "Traceback" not in proc.stderr


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return evolve_zygote.run([*args, "--db", "sqlite:///" + str(db)], dict(os.environ), timeout=600)


def _swap_loop_config(db: Path, run: str, loop: dict) -> None:
    con = sqlite3.connect(db)
    (raw,) = con.execute("select config from run where name = ?", (run,)).fetchone()
    config = json.loads(raw)
    config["loop"] = loop
    config["policy_spec"]["sampling"]["n"] = 4  # that version's spec had sampling.n too (dropped on load)
    con.execute("update run set config = ? where name = ?", (json.dumps(config), run))
    con.commit()
    con.close()


@pytest.mark.parametrize("name", ["legacy-ingroup", "legacy-gate"])
def test_a_run_recorded_in_the_flat_format_replays_resumes_or_is_refused(tiny_model_dir, tmp_path, name):
    """The run is made by this version from the nested equivalent, then its recorded config is replaced
    by what 8bc8562 recorded for the same loop: replay must still be hash-equal, and resume must run.
    Under a deleted rule, both refuse."""
    cfg = tmp_path / "new.toml"
    sel = EQUIVALENT[name]["selection"]
    cfg.write_text((REPO / "configs" / "ci.toml").read_text()
                   .replace("generations = 2", 'generations = 1\nupdate_prompt = "sampled"')
                   + "\n[loop.selection]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in sel.items()))
    db = tmp_path / "l.db"
    assert _cli(db, "run", "--config", str(cfg), "--name", "r").returncode == 0
    _swap_loop_config(db, "r", LEGACY[name]["loop"])
    replay = _cli(db, "replay", "r:1")
    assert replay.returncode == 0 and "replay of r:1: identical" in replay.stdout, replay.stdout + replay.stderr
    if name == "legacy-ingroup":  # resume reads the record the way replay does (from_recorded): once is enough
        resumed = _cli(db, "resume", "r", "--generations", "1")
        assert resumed.returncode == 0, resumed.stderr
        assert "gen   2" in resumed.stdout + resumed.stderr
    # The same record under a rule this version deleted: both commands refuse, in one line naming the
    # version that recorded it.
    _swap_loop_config(db, "r", {**LEGACY[name]["loop"], "gate_rule": "strict", "promote_test": "betting"})
    con = sqlite3.connect(db)
    con.execute("update run set code_version = ? where name = 'r'", (LEGACY[name]["code_version"],))
    con.commit()
    con.close()
    key = "gate_rule = 'strict'" if name == "legacy-gate" else "promote_test = 'betting'"
    for args in (("resume", "r", "--generations", "1"), ("replay", "r:1"))[name == "legacy-gate":]:
        proc = _cli(db, *args)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert len(lines) == 1 and key in lines[0] and "8bc85629" in lines[0], lines
        assert "Traceback" not in proc.stderr


def _kept_loop_config(run: str) -> tuple[dict, str]:
    """The recorded loop config and code version of a kept lineage database (ablation38/gym-RUN.db.gz)."""
    import gzip
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "kept.db"
        db.write_bytes(gzip.decompress((REPO / f"benchmarks/results/lineage/ablation38/gym-{run}.db.gz").read_bytes()))
        con = sqlite3.connect(db)
        raw, version = con.execute("select config, code_version from run").fetchone()
        con.close()
    return json.loads(raw)["loop"], version


def test_a_run_recorded_before_update_prompt_existed_keeps_the_sampled_prompt_rule():
    """update_prompt's default is "incumbent" (issue 38); a real coupled run recorded before the field
    (d1ff791, seed 40) trained under the sampled prompt, so it resumes and replays under that rule; a
    record that names the field keeps what it names."""
    assert LoopConfig().update_prompt == "incumbent"
    old, version = _kept_loop_config("coupled-sfp-s40")
    assert "update_prompt" not in old and version.startswith("d1ff791")
    got = LoopConfig.from_recorded(old, "run coupled-sfp-s40", version)
    assert got.update_prompt == "sampled"
    flat = got.to_dict()  # nothing it recorded reads differently
    kept = [k for k, v in old.items() if not isinstance(v, dict) and k not in MOVED]  # MOVED: now in [loop.prompt]
    assert len(kept) > 20 and [k for k in kept if flat[k] != old[k]] == []
    named, version = _kept_loop_config("coupled-sfp-inc-ctx-s40")
    assert LoopConfig.from_recorded(named, "run x", version).update_prompt == named["update_prompt"] == "incumbent"


def _kept_run_reads_but_is_refused(tmp_path, run: str, rule_text: str, commit: str) -> None:
    """A kept lineage database (benchmarks/results/lineage/ablation38/gym-RUN.db.gz) of a deleted rule:
    its 17 generations read; resume and replay refuse in one line naming the rule and the recorder."""
    import gzip
    import shutil

    db = tmp_path / "kept.db"
    with gzip.open(REPO / f"benchmarks/results/lineage/ablation38/gym-{run}.db.gz") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    shown = _cli(db, "lineage", run, "--json")
    assert shown.returncode == 0 and len(json.loads(shown.stdout)) == 17, shown.stderr
    for args in (("resume", run, "--generations", "1"), ("replay", f"{run}:2")):
        proc = _cli(db, *args)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
        assert len(lines) == 1 and rule_text in lines[0] and commit in lines[0], lines


def test_a_run_recorded_under_the_deleted_value_rule_is_shown_but_not_resumed_or_replayed(tmp_path):
    """A real run of the value-of-look rule (deleted after issue 38's seeds 40-47), as kept in
    benchmarks/results/lineage: its lineage and generations still read; resume and replay refuse in one
    line naming the code version that recorded it."""
    _kept_run_reads_but_is_refused(tmp_path, "coupled-value-s40", "selection.type = 'value'", "95ce19a4")
    with pytest.raises(ConfigError, match="an evolve up to"):  # a record that names no version
        upgrade_recorded({"mode": "coupled", "selection": {"type": "value"}}, "run x")


def test_a_run_recorded_under_the_deleted_lean_share_is_refused_and_one_with_it_off_loads(tmp_path):
    """The lean share (issue 38, deleted after seeds 40-47: no better) as a real kept run: it reads, and
    resume and replay refuse in one line naming the version; a run recorded while the field existed
    but was off (every other run of those commits, the powered ablation's among them) is the same config."""
    _kept_run_reads_but_is_refused(tmp_path, "coupled-lean-s40", "selection.lean_after_looks = 4", "3c63e23")
    off = {"lean_after_looks": 0, "lean_samples": 1, "promising_p": 0.2}
    recorded = LoopConfig().to_dict()
    recorded["selection"] = {**recorded["selection"], **off}
    assert LoopConfig.from_recorded(recorded, "run x") == LoopConfig()


def test_a_run_recorded_under_the_deleted_futility_retirement_is_refused_and_one_with_it_off_loads(tmp_path):
    """Futility retirement (issue 38, deleted after seeds 40-47: no better, and a +5-point lesson's chance of
    promotion 0.57 against 0.90) as a real kept run: it reads, resume and replay refuse in one line naming
    the version; a run recorded while the field existed but was 0 is the same config."""
    _kept_run_reads_but_is_refused(tmp_path, "coupled-futile-s40", "selection.futility_margin = 0.05", "324a5f2")
    recorded = LoopConfig().to_dict()
    recorded["selection"] = {**recorded["selection"], "futility_margin": 0.0}
    assert LoopConfig.from_recorded(recorded, "run x") == LoopConfig()
