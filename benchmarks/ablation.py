"""Ablation on the gym's hard tier: does coupling the two levers beat either one alone?

Live arms (each a real `evolve run` with configs/ablation.toml plus the arm's overrides, ARMS below):
  coupled-sfp-inc-ctx  both levers, in-group prompt selection (sign-flip test on the verdict), every
                       completion trained under the incumbent's prompt (the default, the headline)
  coupled-sfp          the same with each completion trained under the prompt it was sampled with
                       (update_prompt = "sampled", the default until issue 38); -half, -l3: half the
                       budget, at most 3 looks per challenger
  coupled-gate         both levers, GEPA's minibatch-then-validation gate (update_prompt = "sampled")
  weights-only         GRPO alone, seed prompt frozen
  prompt-only-sfp      in-group prompt selection alone, weights frozen
  coupled-sfp-demos    coupled-sfp with demonstration sets as challengers (real-model ablation only)
  random-reward-sfp-inc-ctx, random-reward-sfp
                       the coupled arms with every learning reward Bernoulli(0.5) (both levers see noise)

Every arm spends the same learning-rollout budget (``max_rollouts``, enforced exactly inside a
generation). Held-out: every held-out task x 8 samples at the start and the end
(``heldout_full``; the start depends only on the seed, so one arm per seed measures it); a fixed
12-task x 4-sample subset after every generation (the curves).
Runs go seed by seed (all arms of seed 0 first), at most ``--jobs`` at once, each in its own
SQLite file under ``--out``; each finished run's lineage is saved there, so ``--summarize-only``
reports whatever finished (arms retired since included). Raw results: benchmarks/results/ablation.json
(results_io). ``--resummarise FILE`` recomputes a results file's figures from the runs it recorded
and says whether they equal the recorded ones (how the docs' figures of retired arms stay checked).

    .venv/bin/python benchmarks/ablation.py [--seeds 0,1,2,3,4] [--jobs 2] [--out runs/ablation]
    .venv/bin/python benchmarks/ablation.py --resummarise benchmarks/results/ablation.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import kept_runs  # noqa: E402
from results_io import RESULTS_DIR, print_figures, write_results  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from evolve.gym.notes import DISTRACTORS, NOTES  # noqa: E402

# Live arms only: those behind a figure the docs quote (docs/ablation.md). Each is merged into the
# base config's [loop] table; a "selection" dict is merged into [loop.selection] when its type matches
# the base's, and replaces it otherwise. The in-group settings are the embedded defaults (those measured
# best), so the coupled arms state only what differs. Results files of retired arms (coupled-ts,
# coupled-sf, ... in benchmarks/results/ablation.json) stay readable: summarize() needs no entry here.
IN_GROUP = {"type": "in_group"}
# The arms recorded before update_prompt = "incumbent" became the default pin the rule they ran under.
SAMPLED = {"update_prompt": "sampled"}
GATE = {"type": "gate", "minibatch_tasks": 4, "minibatch_samples": 4, "val_tasks": 12, "val_samples": 2,
        "gate_alpha": 0.2}  # GEPA's minibatch-then-validation gate, inside the same budget (the anchor)
ARMS = {  # name -> overrides of configs/ablation.toml's [loop]
    # both levers, in-group selection on the verdict with the sign-flip test, every completion trained under
    # the prompt it was sampled with (the default until issue 38); heldout_seed_prompt: "does the model still
    # need the prompt?" is measured too
    "coupled-sfp": {"mode": "coupled", "selection": IN_GROUP, "heldout_seed_prompt": True, **SAMPLED},
    # the same stopped at half the budget: its full held-out figure against weights-only's at the whole
    # budget is the direct reading of "reaches weights-only's final with half the rollouts"
    "coupled-sfp-half": {"mode": "coupled", "selection": IN_GROUP, "max_rollouts": 512, **SAMPLED},
    # faster pool turnover: at most 3 looks per challenger (alpha/3 per look)
    "coupled-sfp-l3": {"mode": "coupled", "selection": {"type": "in_group", "promote_looks": 3}, **SAMPLED},
    "coupled-gate": {"mode": "coupled", "selection": GATE, **SAMPLED},
    "weights-only": {"mode": "weights"},
    "prompt-only-sfp": {"mode": "prompt", "selection": IN_GROUP},
    # issue 38's value-of-look rule (arms coupled-value, prompt-only-value) was deleted after seeds 40-47:
    # no better than in-group on either world (ablation38_gym.json, ablation38_nolesson.json; code: a60b6b2);
    # so was coupled-lean (a challenger's share cut to 1 of 8 after 4 looks without a promotion; code: 3c63e23),
    # and coupled-futile (a line shown worth under +0.05 a task retired to free its pool place; code: be4783c)
    # issue 38: the challengers' completions trained under the incumbent's prompt, importance-weighted with the
    # sampler's log-probs (--policy-set grpo.old_logprobs=behaviour). Seeds 40-55 against coupled-sfp, paired:
    # no-lesson +2.2 [+0.2, +4.4], gym +2.1 [-0.4, +5.6] (ablation38*_nolesson.json, ablation38*_gym.json)
    "coupled-sfp-inc-is": {"mode": "coupled", "selection": IN_GROUP, "update_prompt": "incumbent"},
    # the default since issue 38 (update_prompt = "incumbent"): the same update with pi_old of a re-rendered
    # completion the trainer's under the prompt it was sampled with, the other rows on-policy (right under
    # vLLM's top-p too); its records equal coupled-sfp-inc-is's on all 32 runs of seeds 40-55
    "coupled-sfp-inc-ctx": {"mode": "coupled", "selection": IN_GROUP, "update_prompt": "incumbent"},
    # issue 37 item 5 (the real-model ablation only: the gym's model cannot use demonstrations): coupled-sfp
    # with each reflection step also proposing a set of 2 verified successes as a challenger
    "coupled-sfp-demos": {"mode": "coupled", "selection": IN_GROUP, **SAMPLED,
                          "prompt": {"demo_challengers": True, "max_demos": 2}},
    # the coupled default's control: every learning reward Bernoulli(0.5); both levers see noise
    "random-reward-sfp": {"mode": "coupled", "selection": IN_GROUP, "reward": "random", **SAMPLED},
    "random-reward-sfp-inc-ctx": {"mode": "coupled", "selection": IN_GROUP, "reward": "random",
                                  "update_prompt": "incumbent"},
}
HEADLINE = "coupled-sfp-inc-ctx"
DEFAULT_ARMS = "coupled-sfp-inc-ctx,weights-only,prompt-only-sfp,random-reward-sfp-inc-ctx,coupled-gate"
START_ARM = "weights-only"  # measures the seed's start figure (identical for every arm of a seed)


def arm_role(name: str) -> str:
    """What an arm is in the summary, from its name (every arm ever run, live or retired, is named so):
    "single" (weights-only, prompt-only*: one lever), "control" (random-reward*), "half" (*-half: a
    coupled arm stopped at half the budget) or "coupled" (coupled*). Unknown names are "other"."""
    if name == "weights-only" or name.startswith("prompt-only"):
        return "single"
    if name.startswith("random-reward"):
        return "control"
    if name.startswith("coupled"):
        return "half" if name.endswith("-half") else "coupled"
    return "other"


def control_of(headline: str) -> str:
    """The random-reward control with the headline's selection settings (coupled-X -> random-reward-X)."""
    return "random-reward" + headline.removeprefix("coupled")


def arm_order(name: str) -> tuple:
    """Live arms in ARMS order, then retired ones by name (the printed table's order)."""
    return (list(ARMS).index(name), "") if name in ARMS else (len(ARMS), name)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def to_toml(table: dict, name: str = "loop") -> str:
    """``table`` as TOML: its plain keys under ``[name]``, each dict value as its own ``[name.key]``."""
    head = f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in table.items() if not isinstance(v, dict))
    return head + "".join(to_toml(v, f"{name}.{k}") for k, v in table.items() if isinstance(v, dict))


def merge_arm(loop: dict, arm: dict) -> dict:
    """The base ``[loop]`` table with the arm's overrides. ``selection`` merges key by key when the arm
    keeps the base's selection type and replaces the base's table when it names another (a gate field
    under in-group selection is an error, not an inert key)."""
    out = {**loop, **{k: v for k, v in arm.items() if k != "selection"}}
    if isinstance(arm.get("prompt"), dict):  # [loop.prompt] merges key by key
        out["prompt"] = {**loop.get("prompt", {}), **arm["prompt"]}
    if "selection" in arm:
        base = loop.get("selection") if isinstance(loop.get("selection"), dict) else {}
        same = base.get("type", "in_group") == arm["selection"].get("type", "in_group")
        out["selection"] = {**base, **arm["selection"]} if same else dict(arm["selection"])
    return out


def arm_config(base: Path, arm: str, out: Path, budget: int | None, sets: dict | None = None) -> Path:
    loop = merge_arm(tomllib.loads(base.read_text())["loop"], ARMS[arm])
    loop["heldout_full_at_start"] = arm == START_ARM
    if budget:
        loop["max_rollouts"] = budget
    loop.update(sets or {})  # --set: after the arm's own overrides, for every arm
    path = out / f"{arm}.toml"
    path.write_text(to_toml(loop))
    return path


def run_one(out: Path, config: Path, arm: str, seed: int, policy_sets: tuple[str, ...] = ()) -> dict:
    name = f"{arm}-s{seed}"
    done = out / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    db = f"sqlite:///{out / (name + '.db')}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    # A run killed before it finished continues from its newest committed generation (resume equals
    # straight-through, tests/loop), for the generations it had left; one killed before generation 0
    # committed starts again.
    earlier = _committed_generations(db, name, env)
    last = earlier[-1]["index"] if earlier else -1
    resume = last >= 0
    if not resume:
        for stale in out.glob(f"{name}.db*"):
            stale.unlink()
    left = tomllib.loads(config.read_text())["loop"]["generations"] - last
    cmd = (["resume", name, "--db", db, "--generations", str(max(left, 0))] if resume else
           ["run", "--config", str(config), "--seed", str(seed), "--name", name, "--db", db,
            *policy_args(policy_sets)])
    t0 = time.perf_counter()
    with open(out / f"{name}.log", "a" if resume else "w") as log:  # the run's status lines
        subprocess.run([sys.executable, "-m", "evolve", *cmd], cwd=REPO, check=True, stdout=log,
                       stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - t0  # this attempt's only, when resumed (generations keep their total_s)
    gens = _committed_generations(db, name, env, check=True)
    rec = {"arm": arm, "seed": seed, "wall_s": wall, "resumed": resume,
           "generations": [_slim(g) for g in gens]}
    done.write_text(json.dumps(rec))
    print(f"# {name}: {len(gens) - 1} generations, final full pass@1 "
          f"{gens[-1]['metrics'].get('heldout_full', {}).get('pass@1')}, {wall:.0f}s", flush=True)
    return rec


def policy_args(sets: tuple[str, ...]) -> list[str]:
    """--policy-set KEY=VALUE -> `evolve run`'s --policy.KEY VALUE (a resumed run reads its recorded spec)."""
    out = []
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq:
            sys.exit(f"ablation: --policy-set {item}: expected KEY=VALUE (e.g. optimizer.lr=1e-3)")
        out += [f"--policy.{key}", value]
    return out


def arm_power(config: Path, policy_sets: tuple[str, ...]) -> dict | None:
    """What the arm's promotion test can detect (`evolve plan`'s table, issue 37 item 1); None when the
    arm has no prompt lever."""
    from evolve.loop.power import TRIALS, config_power, model_key
    from evolve.loop.run_config import parse_overrides, resolve

    _, overrides = parse_overrides(policy_args(policy_sets))
    settings = resolve(config, overrides, need_cluster=False)
    if settings.loop.mode == "weights":
        return None
    return config_power(settings.loop, model_key(settings.spec), TRIALS)


def _committed_generations(db: str, name: str, env: dict, check: bool = False) -> list[dict]:
    """Run ``name``'s committed generations in ``db`` (``evolve lineage --json``), in index order; [] when
    the file or the run does not exist (``check``: an error instead)."""
    if not check and not Path(db.removeprefix("sqlite:///")).exists():
        return []
    lin = subprocess.run([sys.executable, "-m", "evolve", "lineage", name, "--json", "--db", db], cwd=REPO,
                         check=check, capture_output=True, text=True, env=env)
    if lin.returncode != 0:
        return []
    return sorted((g for g in json.loads(lin.stdout) if g["status"] == "committed"), key=lambda g: g["index"])


def unfinished_runs(out: Path, finished: set[str]) -> list[dict]:
    """Runs under ``out`` that started and have not finished (a database, no record): their committed
    generations so far, as ``run_one`` records them, marked ``"unfinished": true``. No arm figure uses
    them; their generation 0 gives the seed's start figure (the base model's full held-out)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    got = []
    for db_file in sorted(out.glob("*-s*.db")):
        name = db_file.stem
        arm, _, seed = name.rpartition("-s")
        if name in finished or not seed.isdigit():
            continue
        gens = _committed_generations(f"sqlite:///{db_file}", name, env)
        if gens:
            got.append({"arm": arm, "seed": int(seed), "unfinished": True, "generations": [_slim(g) for g in gens]})
    return got


def start_figures(runs: list[dict]) -> dict:
    """Each seed's start figure (generation 0's full held-out: the base model with the seed prompt),
    finished runs or not: ``start_pass_at_K_sSEED``."""
    figures = {}
    for r in sorted(runs, key=lambda r: r["seed"]):
        full = r["generations"][0].get("heldout_full") if r["generations"] else None
        for k in (1, 4, 8):
            if full and f"pass@{k}" in full:
                figures.setdefault(f"start_pass_at_{k}_s{r['seed']}", round(full[f"pass@{k}"], 4))
    return figures


def _slim(g: dict) -> dict:
    m = g["metrics"]
    return {"index": g["index"], "prompt_version": g["prompt_version"],
            "rollouts_spent": m.get("rollouts_spent", 0), "heldout": m["heldout"],
            "heldout_full": m.get("heldout_full"), "heldout_full_seed": m.get("heldout_full_seed"),
            "all_fail_task_fraction": m.get("all_fail_task_fraction"),
            "zero_variance_fraction": m.get("zero_variance_fraction"), "challengers": m.get("challengers"),
            "promoted": m.get("promoted"), "accepted": m.get("accepted"), "prompt_changed": m.get("prompt_changed"),
            "total_s": (m.get("timings") or {}).get("total")}


# ---- summary ------------------------------------------------------------------------------------

def per_task(gen: dict) -> dict[str, float]:
    full = gen["heldout_full"] or {}
    n = 8  # heldout_final_samples
    return {t: c / n for t, c in (full.get("per_task") or {}).items()}


def bootstrap_diff(a: dict[int, dict], b: dict[int, dict], reps: int = 2000, seed: int = 0) -> tuple:
    """Paired mean difference a - b over (seed, task), with a 95% bootstrap interval that resamples
    seeds and, within each, tasks."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None, None, None
    tasks = sorted(set.intersection(*(set(a[s]) & set(b[s]) for s in seeds)))
    d = np.array([[a[s][t] - b[s][t] for t in tasks] for s in seeds])
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(reps):
        rows = d[rng.integers(0, len(seeds), len(seeds))]
        cols = rng.integers(0, len(tasks), len(tasks))
        stats.append(rows[:, cols].mean())
    return float(d.mean()), float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def start_figure(runs: list[dict], seed: int) -> float:
    """The seed's generation-0 full held-out pass@1 (measured by one arm per seed)."""
    got = [r["generations"][0]["heldout_full"]["pass@1"] for r in runs
           if r["seed"] == seed and r["generations"][0].get("heldout_full")]
    return got[0] if got else float("nan")


def rollouts_to_reach(gens: list[dict], target: float) -> int | None:
    for g in gens[1:]:
        if g["heldout"]["pass@1"] >= target - 1e-9:
            return g["rollouts_spent"]
    return None


def _promoted(g: dict) -> bool:
    """The prompt changed in this generation (in-group: a promotion; gate: an accepted proposal)."""
    return bool(g.get("promoted") or g.get("prompt_changed"))


LESSON = "Include the boundary value k."  # the gym's one lesson that matters on the hard tier


def lesson_first_look(run: dict) -> int | None:
    """The generation in which a challenger adding LESSON was first sampled (discovery time)."""
    return next((g["index"] for g in run["generations"]
                 if any(LESSON in (c.get("added") or "") for c in g.get("challengers") or [])), None)


def _helpful(text: str | None) -> bool:
    return any(note in (text or "") for note in NOTES.values())


def discovery(run: dict) -> dict:
    """Issue 38's discovery figures for one run: the generation a challenger adding one of the gym's
    helpful lines (any note line) was first sampled and first promoted, and the share of challenger looks
    (and of challenger samples) spent on lines that add none (null or harmful for the teacher)."""
    looks = [(g["index"], c) for g in run["generations"] for c in g.get("challengers") or []]
    helpful = [(i, c) for i, c in looks if _helpful(c.get("added"))]
    unhelpful = [c for _, c in looks if not _helpful(c.get("added"))]
    samples = sum(c.get("samples", 0) for _, c in looks)
    return {"helpful_first_look_at": min((i for i, _ in helpful), default=None),
            "helpful_first_promoted_at": min((i for i, c in helpful if c["decision"] == "promoted"), default=None),
            "looks": len(looks), "looks_on_unhelpful": len(unhelpful),
            "samples_on_unhelpful_share": (sum(c.get("samples", 0) for c in unhelpful) / samples) if samples else None}


def distractor_record(runs) -> dict:
    """The gym's distractor lines (known to change nothing for the teacher) that were sampled as
    challengers, and how many of them were promoted (the promotion rule's error rate, in the wild)."""
    tested = promoted = 0
    for r in runs:
        last: dict = {}
        for g in r["generations"]:
            for c in g.get("challengers") or []:
                last[c["id"]] = c
        hits = [c for c in last.values() if c.get("added") in DISTRACTORS]
        tested += len(hits)
        promoted += sum(c["decision"] == "promoted" for c in hits)
    return {"tested": tested, "promoted": promoted}


def summarize(runs: list[dict], headline: str = HEADLINE, unfinished: list[dict] = ()) -> tuple[dict, dict]:
    """The per-arm table and the headline figures (``unfinished`` runs give start figures only). Arms are
    told apart by their names (``arm_role``), so runs of arms no longer in ARMS summarise exactly as they
    did when they ran."""
    arms = sorted({r["arm"] for r in runs}, key=arm_order)
    by_arm = {a: {r["seed"]: r for r in runs if r["arm"] == a} for a in arms}
    table, finals_task = {}, {}
    for a, rs in by_arm.items():
        finals = [r["generations"][-1]["heldout_full"]["pass@1"] for r in rs.values()]
        starts = [start_figure(runs, s) for s in rs]
        curve_final = [r["generations"][-1]["heldout"]["pass@1"] for r in rs.values()]
        fail = {}
        for r in rs.values():
            for g in r["generations"][1:]:
                fail.setdefault(g["index"], []).append(g["all_fail_task_fraction"])
        table[a] = {"seeds": sorted(rs), "final_pass@1_mean": float(np.mean(finals)),
                    "final_pass@1_sd": float(np.std(finals, ddof=1)) if len(finals) > 1 else 0.0,
                    "start_pass@1_mean": float(np.nanmean(starts)) if starts else float("nan"),
                    "final_pass@8_mean": float(np.mean([r["generations"][-1]["heldout_full"]["pass@8"]
                                                        for r in rs.values()])),
                    "subset_final_pass@1_mean": float(np.mean(curve_final)),
                    "all_fail_share_by_generation": {k: float(np.mean(v)) for k, v in sorted(fail.items())},
                    "final_pass@1_seed_prompt": [(r["generations"][-1].get("heldout_full_seed") or
                                                  r["generations"][-1]["heldout_full"])["pass@1"] for r in rs.values()],
                    "promotions": [sum(1 for g in r["generations"] if _promoted(g)) for r in rs.values()],
                    "distractors": distractor_record(rs.values()),
                    "first_promotion_at": [next((g["index"] for g in r["generations"] if _promoted(g)), None)
                                           for r in rs.values()],
                    "lesson_first_look_at": [lesson_first_look(r) for r in rs.values()],
                    "discovery": {s: discovery(r) for s, r in rs.items()},
                    "wall_s_mean": float(np.mean([r["wall_s"] for r in rs.values()]))}
        finals_task[a] = {s: per_task(r["generations"][-1]) for s, r in rs.items()}
    figures: dict = {}
    for a in arms:
        figures[f"{a.replace('-', '_')}_pass_at_1"] = round(table[a]["final_pass@1_mean"], 4)
    singles = [a for a in arms if arm_role(a) == "single"]
    coupled_arms = [a for a in arms if arm_role(a) == "coupled"]
    if "weights-only" in singles and len(singles) >= 2:
        best = max(singles, key=lambda a: table[a]["final_pass@1_mean"])
        for a in coupled_arms:  # every coupled variant against the best single lever, paired by seed and task
            mean, lo, hi = bootstrap_diff(finals_task[a], finals_task[best])
            table[f"{a}_minus_best_single"] = {"best_single": best, "mean": mean, "ci95": [lo, hi],
                                               "seeds_paired": sorted(set(finals_task[a]) & set(finals_task[best]))}
        for a in coupled_arms:
            if a != headline:
                figures[f"{a.replace('-', '_')}_minus_best_single"] = round(100 * table[f"{a}_minus_best_single"]["mean"], 2)
        if headline in table:
            row = table[f"{headline}_minus_best_single"]
            figures["coupled_arm"] = headline
            figures["coupled_minus_best_single"] = round(100 * row["mean"], 2)
            figures["coupled_minus_best_single_ci95_low"] = round(100 * row["ci95"][0], 2)
            figures["coupled_minus_best_single_ci95_high"] = round(100 * row["ci95"][1], 2)
            figures["seeds_paired"] = len(row["seeds_paired"])
            d = table[headline]["distractors"]
            figures["distractors_promoted"] = d["promoted"]
            figures["distractors_tested"] = d["tested"]
    if "weights-only" in table:  # issue 38: every coupled arm against weights-only (the no-lesson world's floor)
        for a in coupled_arms:
            mean, lo, hi = bootstrap_diff(finals_task[a], finals_task["weights-only"])
            table[f"{a}_minus_weights_only"] = {"mean": mean, "ci95": [lo, hi],
                                                "seeds_paired": sorted(set(finals_task[a]) & set(finals_task["weights-only"]))}
    half = f"{headline}-half"
    if half in table and "weights-only" in table:
        mean, lo, hi = bootstrap_diff(finals_task[half], finals_task["weights-only"])
        table["half_budget_minus_weights_final"] = {"arm": half, "mean": mean, "ci95": [lo, hi]}
        figures["coupled_half_budget_minus_weights_final"] = round(100 * mean, 2)
        figures["coupled_half_budget_minus_weights_final_ci95_low"] = round(100 * lo, 2)
        figures["coupled_half_budget_minus_weights_final_ci95_high"] = round(100 * hi, 2)
    if "coupled-gate" in table and headline in table and headline != "coupled-gate":
        mean, lo, hi = bootstrap_diff(finals_task[headline], finals_task["coupled-gate"])
        table["in_group_minus_gate"] = {"arm": headline, "mean": mean, "ci95": [lo, hi]}
        figures["in_group_minus_gate"] = round(100 * mean, 2)
    for a in arms:  # gain over the seed's start (the random control must show none)
        rs = by_arm[a]
        gains = [r["generations"][-1]["heldout_full"]["pass@1"] - start_figure(runs, s) for s, r in rs.items()]
        table[a]["gain_over_start_mean"] = float(np.nanmean(gains))
        if a.startswith("random-reward"):
            key = "random_control_gain" if a == control_of(headline) else f"{a.replace('-', '_')}_gain"
            figures[key] = round(100 * float(np.nanmean(gains)), 2)
    if "weights-only" in table:
        _rollouts_to_match(table, figures, by_arm, coupled_arms, headline)
    figures.update(start_figures([*runs, *unfinished]))
    return table, figures


def _rollouts_to_match(table: dict, figures: dict, by_arm: dict, coupled_arms: list, headline: str) -> None:
    """Learning rollouts each arm needed to reach weights-only's final subset pass@1 (and the ratio)."""
    w = by_arm["weights-only"]
    target = table["weights-only"]["subset_final_pass@1_mean"]
    budget = float(np.mean([r["generations"][-1]["rollouts_spent"] for r in w.values()]))
    for a, rs in by_arm.items():
        got = [rollouts_to_reach(r["generations"], target) for r in rs.values()]
        table[a]["rollouts_to_weights_final"] = got
    for a in coupled_arms:
        if a != headline:
            got = table[a]["rollouts_to_weights_final"]
            ok = [g for g in got if g is not None]
            figures[f"{a.replace('-', '_')}_rollouts_to_match_weights_ratio"] = (
                round(float(np.mean(ok)) / budget, 3) if ok and len(ok) == len(got) else "never")
    got = table.get(headline, {}).get("rollouts_to_weights_final") or []
    reached = [g for g in got if g is not None]
    ratio = (float(np.mean(reached)) / budget) if reached and len(reached) == len(got) else None
    curve = _mean_curve_reach(by_arm.get(headline, {}), target)
    # a third reading, paired by seed: each seed's own weights-only final (same held-out subset, same start)
    own = {s: rollouts_to_reach(r["generations"], w[s]["generations"][-1]["heldout"]["pass@1"])
           for s, r in by_arm.get(headline, {}).items() if s in w}
    paired = float(np.mean(list(own.values()))) / budget if own and None not in own.values() else None
    table["rollouts_to_match_weights"] = {"target_subset_pass@1": target, "weights_budget": budget,
                                          "arm": headline, "reached_at": got, "ratio": ratio,
                                          "mean_curve_reached_at": curve, "paired_reached_at": own}
    figures["rollouts_to_match_weights_ratio"] = round(ratio, 3) if ratio is not None else "never"
    figures["rollouts_to_match_weights_ratio_mean_curve"] = round(curve / budget, 3) if curve else "never"
    figures["rollouts_to_match_weights_ratio_paired"] = round(paired, 3) if paired is not None else "never"


def _mean_curve_reach(runs: dict, target: float) -> int | None:
    """Learning rollouts at which the seeds' mean subset curve first reaches ``target`` (generations
    are aligned: every arm spends the same rollouts per generation). A second reading of the same
    question: the per-seed figure above says "never" when one seed's curve misses it."""
    rs = list(runs.values())
    if not rs:
        return None
    n = min(len(r["generations"]) for r in rs)
    for i in range(1, n):
        if np.mean([r["generations"][i]["heldout"]["pass@1"] for r in rs]) >= target - 1e-9:
            return int(np.mean([r["generations"][i]["rollouts_spent"] for r in rs]))
    return None


def reuse_runs(path: Path, arms: list[str], rename: dict[str, str], out: Path) -> list[str]:
    """Copy finished runs of ``arms`` from an earlier ablation.json into ``out`` (as if run here),
    each tagged with the commit that ran it; ``rename`` relabels an arm whose code has changed since."""
    old = json.loads(path.read_text())
    commit = old.get("commit", "?")
    done = []
    for r in old["results"]["runs"]:
        if r["arm"] not in arms:
            continue
        rec = {**r, "arm": rename.get(r["arm"], r["arm"]), "reused_from": r.get("reused_from", commit)}
        name = f"{rec['arm']}-s{rec['seed']}"
        if not (out / f"{name}.json").exists():
            (out / f"{name}.json").write_text(json.dumps(rec))
            done.append(name)
    return done


def code_commit() -> str:
    """HEAD, with "+dirty" when evolve/, benchmarks/ (results aside) or configs/ differ from it."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "evolve", "benchmarks",
                                 "configs", ":(exclude)benchmarks/results"], cwd=REPO, capture_output=True, text=True).stdout.strip())
    return commit + ("+dirty" if dirty else "")


def record_batch(out: Path, args, ran: list, reused: list[str], started_at: str) -> list[dict]:
    """Append this invocation to ``out/batches.json`` (every batch's arguments, commits and runs)."""
    path = out / "batches.json"
    batches = json.loads(path.read_text()) if path.exists() else []
    batches.append({"args": vars(args), "commit_at_start": started_at, "commit": code_commit(),
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "ran": [f"{a}-s{s}" for s, a in ran], "reused": reused})
    path.write_text(json.dumps(batches, indent=1))
    return batches


def resummarise(path: Path) -> int:
    """Re-run ``summarize`` on the runs a results file recorded; 0 iff every recorded figure comes out equal."""
    try:
        doc = json.loads(path.read_text())
        runs, batches = doc["results"]["runs"], doc["args"]["batches"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"ablation: {path} is not an ablation results file ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    headline = batches[-1]["args"].get("headline_arm") or HEADLINE
    _, figures = summarize(runs, headline, doc["results"].get("unfinished", []))
    figures = json.loads(json.dumps(figures))  # as the file stores them
    # every recorded figure must come out equal; one the code computes since the file was written is new
    differ = sorted(k for k in doc["figures"] if figures.get(k, "missing") != doc["figures"][k])
    new = sorted(set(figures) - set(doc["figures"]))
    print_figures(figures)
    for k in differ:
        print(f"# differs: {k}: recorded {doc['figures'][k]!r}, now {figures.get(k, 'missing')!r}", file=sys.stderr)
    print(f"# {path.name}: {len(doc['figures'])} recorded figures from {len(runs)} runs, headline {headline}: "
          f"{'all equal' if not differ else f'{len(differ)} differ'}" + (f"; new since: {', '.join(new)}" if new else ""))
    return 1 if differ else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(REPO / "configs" / "ablation.toml"))
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--arms", default=DEFAULT_ARMS)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--budget", type=int, default=None, help="override max_rollouts")
    ap.add_argument("--out", default=str(REPO / "runs" / "ablation"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=TOML",
                    help="a [loop] value for every arm, after the arm's overrides (e.g. heldout_seed_prompt=false: "
                         "the real-model ablation cannot afford coupled-sfp's second full held-out pass)")
    ap.add_argument("--policy-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a policy-spec value for every arm (`evolve run --policy.KEY VALUE`; e.g. optimizer.lr=1e-3)")
    ap.add_argument("--plan", default=None, help="explicit run order SEED:ARM,... (instead of seeds x arms)")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--results-name", default="ablation",
                    help="benchmarks/results/NAME.json (ablation_smollm2 for configs/ablation-smollm2.toml)")
    ap.add_argument("--headline-arm", default=HEADLINE, help="the coupled arm of the headline figures")
    ap.add_argument("--reuse", default=None, help="an earlier ablation.json to take finished runs from")
    ap.add_argument("--reuse-arms", default=DEFAULT_ARMS, help="arms whose runs --reuse takes")
    ap.add_argument("--rename", default="", help="OLD=NEW,...: relabel reused arms whose code changed since")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="a batch that spans machines: restore DIR's runs into --out first, and keep every run "
                         "there (lineage snapshot gzipped; an unfinished run's artifacts) after each finishes "
                         "and at the end (benchmarks/kept_runs.py)")
    ap.add_argument("--resummarise", type=Path, default=None, metavar="RESULTS_JSON",
                    help="summarise a results file's recorded runs again (its own headline arm) and exit 1 "
                         "if any figure differs from the one it records; writes nothing")
    args = ap.parse_args()
    if args.resummarise:
        sys.exit(resummarise(args.resummarise))
    unknown = sorted(set(args.arms.split(",")) - set(ARMS))
    if unknown and not args.summarize_only:
        sys.exit(f"ablation: unknown arm(s) {', '.join(unknown)}; live arms: {', '.join(ARMS)} "
                 "(a retired arm's recorded runs re-summarise with --resummarise)")
    started_at = code_commit()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    keep = Path(args.keep) if args.keep else None  # a str in args: the batch record is JSON
    if keep:
        print(f"# restored from {keep}: {', '.join(kept_runs.restore(keep, out)) or 'nothing'}", flush=True)
    arms = args.arms.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    reused = (reuse_runs(Path(args.reuse), args.reuse_arms.split(","),
                         dict(x.split("=") for x in args.rename.split(",") if x), out) if args.reuse else [])
    plan = []
    if args.summarize_only:
        runs = [json.loads(p.read_text()) for p in sorted(out.glob("*-s*.json"))]
    else:
        plan = ([(int(x.split(":")[0]), x.split(":")[1]) for x in args.plan.split(",")] if args.plan
                else [(s, a) for s in seeds for a in arms])
        sets = {k: tomllib.loads(f"v = {v}")["v"] for k, v in (x.split("=", 1) for x in args.set)}
        configs = {a: arm_config(Path(args.config), a, out, args.budget, sets) for a in {a for _, a in plan}}
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_one, out, configs[a], a, s, tuple(args.policy_set)) for s, a in plan]
            for f in futures:
                f.result()
                if keep:
                    kept_runs.keep(out, keep)
        runs = [json.loads(p.read_text()) for p in sorted(out.glob("*-s*.json"))]  # with earlier runs
    unfinished = unfinished_runs(out, {f"{r['arm']}-s{r['seed']}" for r in runs})
    table, figures = summarize(runs, args.headline_arm, unfinished)
    print()
    for a, row in table.items():
        if "final_pass@1_mean" in row:
            print(f"{a:<14} start {row['start_pass@1_mean']:.3f}  final {row['final_pass@1_mean']:.3f} ± "
                  f"{row['final_pass@1_sd']:.3f}  pass@8 {row['final_pass@8_mean']:.3f}  seeds {row['seeds']}  "
                  f"reach {row.get('rollouts_to_weights_final')}")
    batches = record_batch(out, args, plan, reused, started_at)
    # this batch's arms under its settings; a reused arm keeps the power its own batch recorded (its rule
    # may since have been deleted, so its config no longer loads)
    # (--summarize-only rewrites its own results file: what that file recorded stays)
    source = Path(args.reuse) if args.reuse else RESULTS_DIR / f"{args.results_name}.json"
    earlier = json.loads(source.read_text())["results"].get("power", {}) if source.exists() else {}
    power = {**earlier, **{a: arm_power(out / f"{a}.toml", tuple(args.policy_set)) for a in sorted({a for _, a in plan})
                           if (out / f"{a}.toml").exists()}}
    if keep:
        print(f"# kept in {keep}: {', '.join(kept_runs.keep(out, keep))}", flush=True)
    write_results(args.results_name, args={"batches": batches},
                  results={"runs": runs, "unfinished": unfinished, "summary": table, "power": power}, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
