"""What a config's prompt-promotion test can detect, before anything is spent (issue 37 item 1).

For a loop config, the chance that a lesson worth +5 or +10 points of pass@1 is promoted, and that a
line that changes nothing is (the false-promotion rate), at the configured shape: tasks a look, the
incumbent's and the challenger's samples of each task, the looks one challenger can get within the
generations and rollout budget, and the rule's per-look threshold. A seeded Monte Carlo simulation
draws each look's paired outcomes from the suite's per-task pass rates and hands the differences to the
project's own rule (``EvidenceRule.decide``; the gate's ``gate_passes``), so the figures are the rule's,
not a re-derivation of it. The method, the assumptions and the shipped configs' figures are in
docs/ablation.md, "Power".

Two models of the pairing bound what the loop sees: **crn** (ideal common random numbers: sample j of the
incumbent and of the challenger share one uniform u, the incumbent passes a task of rate p when u < p and
the challenger when u < p + d'; a line that changes nothing never differs) and **independent** (fresh
uniforms for the challenger). The real loop shares seeds, but another prompt changes the tokens, so it lies
between the two. d' is one shift for every task, clipped to [0, 1] per task, chosen so that the mean
effect over the suite's tasks is the stated one.

Simplifications, written down: the rates stay fixed over the looks (the weights do not move), the lesson
gets the challenger half of every generation from the first one with a challenger (generation 2: the pool
is empty until generation 1 reflects) until the rule decides (Thompson sampling among several challengers
gives it fewer), tasks are drawn uniformly without replacement within a look, guided retries spend none of
the budget, and at the gate only the validation test is simulated (its minibatch gate comes first and
only lowers both rates).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evolve.errors import ConfigError
from evolve.loop.config import LoopConfig
from evolve.loop.context import plan_batch
from evolve.loop.selection.configs import GateSelection
from evolve.loop.selection.in_group import evidence_rule
from evolve.prompt.evidence import Evidence, EvidenceRule
from evolve.prompt.gate_rule import gate_passes

EFFECTS = (0.0, 0.05, 0.10)  # mean effect of a line on pass@1 (0 = a line that changes nothing)
MODELS = ("crn", "independent")
TRIALS = 2000  # `evolve plan`: standard error <= 0.011 a cell
RUN_TRIALS = 200  # `evolve run`'s start-up table (standard error <= 0.035): seconds at the largest shipped shape
CACHE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "pass_rates.json"
PRIOR_TASKS = 41  # the prior's stand-in suite: rates (i + 0.5) / 41, a uniform spread over [0, 1]


@dataclass(frozen=True)
class PassRates:
    """The per-task pass rates a simulation draws from, and where they came from (said in the output)."""

    rates: tuple[float, ...]
    source: str
    measured: bool


@dataclass(frozen=True)
class Shape:
    """What one challenger is measured on."""

    selection: str  # "in_group" | "gate"
    look_tasks: tuple[int, ...]  # tasks of each look the challenger can get, in order
    incumbent_samples: int
    challenger_samples: int
    threshold: float  # the test's p-value threshold a look
    batches: tuple[tuple[int, int], ...]  # (tasks, samples a task) of each learning generation

    def describe(self) -> str:
        pairs = sum(self.look_tasks)
        rollouts = sum(t * g for t, g in self.batches)
        if self.selection == "gate":
            return (f"gate: {self.look_tasks[0]} validation tasks x ({self.incumbent_samples} vs "
                    f"{self.challenger_samples}) samples, one test at p <= {self.threshold:.4g}")
        looks = len(self.look_tasks)
        tasks = sorted(set(self.look_tasks))
        return (f"in_group: {'/'.join(map(str, tasks))} tasks x ({self.incumbent_samples} vs "
                f"{self.challenger_samples}) samples a look, {looks} look{'s' * (looks != 1)} "
                f"(at most {pairs} paired tasks) at p <= {self.threshold:.4g} a look; "
                f"{len(self.batches)} learning generations, {rollouts} learning rollouts")


def learning_batches(cfg: LoopConfig) -> list[tuple[int, int]]:
    """(tasks, samples a task) of each learning generation the config runs: ``generations`` of them,
    the last ones shrunk by ``max_rollouts`` as the controller does (``plan_batch``)."""
    spent, out = 0, []
    for _ in range(cfg.generations):
        left = None if cfg.max_rollouts is None else cfg.max_rollouts - spent
        if left is not None and left <= 0:
            break
        tasks, group = plan_batch(cfg.tasks_per_generation, cfg.samples_per_task, left)
        out.append((tasks, group))
        spent += tasks * group
    return out


def shape_of(cfg: LoopConfig) -> Shape | None:
    """The promotion test's shape under ``cfg``; None when the prompt is frozen (mode "weights")."""
    if cfg.mode == "weights":
        return None
    batches = tuple(learning_batches(cfg))
    sel = cfg.selection
    if isinstance(sel, GateSelection):
        return Shape("gate", (sel.val_tasks,), sel.val_samples, sel.val_samples, sel.gate_alpha, batches)
    # in_group's split (InGroup.arms): the challenger gets half of each group, the incumbent the rest
    per = cfg.samples_per_task // 2
    rule = evidence_rule(sel)
    # No challenger in the first learning generation (the pool fills when it reflects), nor in one whose
    # group the budget shrank; the rule retires a challenger after promote_looks looks.
    looks = [t for t, g in batches[1:] if g == cfg.samples_per_task and per > 0][: rule.looks]
    return Shape("in_group", tuple(looks), cfg.samples_per_task - per, per, rule.alpha / rule.looks, batches)


def effect_shift(rates: np.ndarray, effect: float) -> float | None:
    """The one shift c with mean(clip(p + c, 0, 1) - p) = ``effect`` (bisection), or None when even
    c = 1 (every task always passes) falls short."""
    if effect <= 0:
        return 0.0
    if float(np.mean(1.0 - rates)) < effect - 1e-12:
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if float(np.mean(np.clip(rates + mid, 0.0, 1.0) - rates)) < effect:
            low = mid
        else:
            high = mid
    return high


def _decider(shape: Shape, cfg: LoopConfig):
    """decide(look index, every difference so far in order, this look's (incumbent, challenger)
    scores) -> the decision after that look, by the project's own rule; memoised, since small shapes
    see the same evidence again and again."""
    memo: dict = {}
    if shape.selection == "gate":
        sel = cfg.selection

        def gate(look, diffs, inc, ch):
            ids = [f"t{i:04d}" for i in range(len(inc))]  # paired_diffs pairs by id
            ok, _ = gate_passes(dict(zip(ids, ch, strict=True)), dict(zip(ids, inc, strict=True)),
                                sel.gate_alpha, sel.gate_margin)
            return "promoted" if ok else "rejected"
        return gate

    sel = cfg.selection
    assert not isinstance(sel, GateSelection)  # shape.selection is "gate" exactly when it is
    rule: EvidenceRule = evidence_rule(sel)

    def in_group(look, diffs, inc, ch):
        key = (look, diffs)
        if key not in memo:
            # decide() reads only the differences and how many looks came before this one
            memo[key] = rule.decide(Evidence(per_generation=[0] * look), list(diffs))
        return memo[key]
    return in_group


def _draw(p: np.ndarray, q: np.ndarray, n_inc: int, n_ch: int, model: str, rng) -> tuple[np.ndarray, np.ndarray]:
    """Mean passes of the incumbent (rates p) and the challenger (rates q) on each task of each trial
    (p, q: trials x tasks)."""
    u = rng.random((*p.shape, max(n_inc, n_ch)))
    v = u if model == "crn" else rng.random(u.shape)
    inc = (u[..., :n_inc] < p[..., None]).mean(axis=-1)
    ch = (v[..., :n_ch] < q[..., None]).mean(axis=-1)
    return inc, ch


def promotion_rate(rates, shape: Shape, cfg: LoopConfig, effect: float, model: str, trials: int = TRIALS,
                   seed: int = 0) -> float | None:
    """Share of ``trials`` simulated challengers of mean effect ``effect`` that the rule promotes
    (None: the effect does not fit under a pass rate of 1)."""
    rates = np.asarray(rates, dtype=np.float64)
    shift = effect_shift(rates, effect)
    if shift is None:
        return None
    if not shape.look_tasks:
        return 0.0
    target = np.clip(rates + shift, 0.0, 1.0)
    rng = np.random.default_rng(seed)
    decide = _decider(shape, cfg)
    active = np.ones(trials, dtype=bool)
    promoted = np.zeros(trials, dtype=bool)
    history: list[tuple[float, ...]] = [() for _ in range(trials)]
    for look, n_tasks in enumerate(shape.look_tasks):
        keys = rng.random((trials, len(rates)))
        idx = np.argsort(keys, axis=1)[:, :n_tasks] if n_tasks <= len(rates) else \
            rng.integers(0, len(rates), (trials, n_tasks))
        inc, ch = _draw(rates[idx], target[idx], shape.incumbent_samples, shape.challenger_samples, model, rng)
        diffs = ch - inc
        for t in np.flatnonzero(active):
            history[t] += tuple(diffs[t].tolist())
            decision = decide(look, history[t], inc[t].tolist(), ch[t].tolist())
            if decision != "active":
                active[t] = False
                promoted[t] = decision == "promoted"
        if not active.any():
            break
    return float(promoted.mean())


def load_pass_rates(cfg: LoopConfig, model: str, cache: Path | None = None) -> PassRates:
    """The cached per-task rates of ``model`` on the config's suite, else the stated prior."""
    path = Path(cache) if cache is not None else CACHE
    if path.is_file():
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))["results"]["entries"]
            hit = next((e for e in entries if e["suite"] == cfg.suite and e["model"] == model), None)
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path}: not a pass-rates cache ({type(e).__name__}: {e})") from None
        if hit is not None:
            rates = tuple(float(x) for x in hit["rates"].values())
            return PassRates(rates, f"measured: {len(rates)} tasks of {cfg.suite}, {hit['evaluations']} "
                                    f"base evaluations pooled ({path.name})", True)
    rates = tuple((i + 0.5) / PRIOR_TASKS for i in range(PRIOR_TASKS))
    return PassRates(rates, f"PRIOR (no measured rates for {cfg.suite} / {model} in {path.name}): "
                            f"{PRIOR_TASKS} tasks, rates spread evenly over [0, 1]", False)


def power_table(cfg: LoopConfig, rates: PassRates, trials: int = TRIALS, seed: int = 0,
                effects: tuple[float, ...] = EFFECTS) -> dict:
    """The JSON-able power record of a config (what ``evolve run`` stores in the run's config)."""
    t0 = time.perf_counter()
    shape = shape_of(cfg)
    base = {"method": "docs/ablation.md, Power", "trials": trials, "seed": seed,
            "pass_rates": rates.source, "pass_rates_measured": rates.measured,
            "mean_pass_rate": round(float(np.mean(rates.rates)), 4)}
    if shape is None:
        return {**base, "shape": None, "note": "mode weights: the prompt is frozen, nothing is promoted"}
    rows = []
    for i, effect in enumerate(effects):
        row = {"effect_points": round(100 * effect, 2)}
        for j, model in enumerate(MODELS):
            row[model] = promotion_rate(rates.rates, shape, cfg, effect, model, trials, seed + 1000 * i + j)
        rows.append(row)
    sel = cfg.selection
    bound = sel.gate_alpha if isinstance(sel, GateSelection) else sel.promote_alpha
    return {**base, "shape": shape.describe(), "selection": shape.selection, "look_tasks": list(shape.look_tasks),
            "samples": [shape.incumbent_samples, shape.challenger_samples], "threshold": shape.threshold,
            "null_bound": bound, "rows": rows, "seconds": round(time.perf_counter() - t0, 2)}


def power_lines(table: dict) -> list[str]:
    """The table as text: what ``evolve plan`` prints and ``evolve run`` prints at its start."""
    lines = [f"power of the prompt-promotion test (simulated; {table['method']})"]
    if table["shape"] is None:
        return [*lines, f"  {table['note']}"]
    se = 0.5 / np.sqrt(table["trials"])
    lines += [f"  shape: {table['shape']}",
              f"  pass rates: {table['pass_rates']}; mean {table['mean_pass_rate']:.3f}",
              "  P(promoted)           ideal CRN  independent",]
    for row in table["rows"]:
        name = "null line (Δ 0)" if row["effect_points"] == 0 else f"lesson +{row['effect_points']:g} points"
        cells = "  ".join(f"{'n/a' if row[m] is None else f'{row[m]:.3f}':>10}" for m in MODELS)
        bound = f"   (bound {table['null_bound']:g})" if row["effect_points"] == 0 else ""
        lines.append(f"  {name:<20} {cells}{bound}")
    lines.append(f"  {table['trials']} seeded trials a cell (seed {table['seed']}; standard error <= {se:.3f}), "
                 f"{table['seconds']:.1f} s; the loop's pairing lies between the two columns")
    return lines


def model_key(spec) -> str:
    """What the pass-rate cache files a policy's model under: the spec's model string (one model under
    any backend), plus the builder's settings of the embedded tiny-coder (the CI preset is another model)."""
    if spec.model == "tiny-coder":
        return f"tiny-coder@{json.dumps(spec.bootstrap, sort_keys=True)}"
    return spec.model


def config_power(cfg: LoopConfig, model: str, trials: int = TRIALS, seed: int = 0, cache: Path | None = None) -> dict:
    """The power record of ``cfg`` whose policy samples ``model`` (``model_key`` of its spec)."""
    if not isinstance(trials, int) or trials < 1:
        raise ConfigError(f"power: trials must be a positive integer, got {trials!r}")
    return power_table(cfg, load_pass_rates(cfg, model, cache), trials, seed)
