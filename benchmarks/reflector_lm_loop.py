"""``benchmarks/reflector_lm.py --stage loop``: prompt-only runs on the gym's hard tier, the served LM
reflector against the offline (lesson-library) reflector, same seeds and budget.

Each run is ``configs/ablation.toml`` with the ``prompt-only-sfp`` arm of benchmarks/ablation.py (in-group
selection, 1024 learning rollouts, full held-out at start and end); the LM arm adds
``prompt.reflection_lm``/``prompt.api_base``. Finished runs are kept under ``--out`` and reused (stoppable,
continuable). Per run: held-out pass@1 start/end, every rule the LM wrote (accepted or refused), every
challenger tried and promoted, and the effect of each promoted lessons text on the base model's held-out
pass@1 (scored by :class:`reflector_lm.Gym`; "changes nothing" = within 2 points).
"""

from __future__ import annotations

import json
import sqlite3
import tomllib
from pathlib import Path

from ablation import ARMS, REPO, merge_arm, run_one, to_toml

from evolve.util.toml_files import merge

ARM = "prompt-only-sfp"


def _config(out: Path, name: str, extra: dict, budget: int | None) -> Path:
    loop = merge_arm(tomllib.loads((REPO / "configs" / "ablation.toml").read_text())["loop"], ARMS[ARM])
    loop = merge(loop, {"heldout_full_at_start": True, **extra})  # a [loop.prompt] table merges key by key
    if budget:
        loop["max_rollouts"] = budget
    path = out / f"{name}.toml"
    path.write_text(to_toml(loop))
    return path


def _lineage_facts(db: Path, name: str) -> dict:
    """Rules the reflector wrote (from the recorded calls) and the lessons of every prompt version."""
    con = sqlite3.connect(db)
    try:
        calls = con.execute("select model, response, error, latency_s from lm_call where role = 'reflection' "
                            "order by id").fetchall()
        prompts = con.execute("select id, components from prompt_version").fetchall()
    finally:
        con.close()
    replies, latencies = [], []
    for model, response, error, latency in calls:
        if model == "offline":
            continue
        latencies.append(latency)
        resp = json.loads(response) if response else {}
        replies += [c.get("content") for c in resp.get("choices", [])] or [f"error: {error}"]
    lessons = {pid: json.loads(comp).get("lessons", "") for pid, comp in prompts}
    return {"lm_calls": len(latencies), "lm_latency_s": latencies, "lm_replies": replies, "lessons_by_prompt": lessons}


def _summary(rec: dict, facts: dict, gym) -> dict:
    gens = rec["generations"]
    start, end = gens[0]["heldout_full"], gens[-1]["heldout_full"]
    promoted = [g["promoted"] for g in gens if g.get("promoted")]
    tried = sorted({c.get("id") or c.get("candidate") for g in gens for c in (g.get("challengers") or [])
                    if isinstance(c, dict)} - {None})
    base = gym.score("")["pass@1"]
    effects = []
    for pid in promoted:
        text = next((v for k, v in facts["lessons_by_prompt"].items() if k.startswith(pid[:16])), None)
        if text is not None:
            effects.append({"prompt": pid[:16], "lessons": text,
                            "delta_points": round(100 * (gym.score(text)["pass@1"] - base), 2)})
    return {"seed": rec["seed"], "wall_s": round(rec["wall_s"]), "start_pass@1": start["pass@1"],
            "end_pass@1": end["pass@1"], "start_pass@8": start.get("pass@8"), "end_pass@8": end.get("pass@8"),
            "promotions": len(promoted), "promoted": effects, "challengers_tried": len(tried),
            "final_lessons": facts["lessons_by_prompt"].get(gens[-1]["prompt_version"], ""),
            "lm_calls": facts["lm_calls"], "lm_latency_s_mean": round(sum(facts["lm_latency_s"]) /
                                                                        max(1, len(facts["lm_latency_s"])), 1),
            "lm_replies": facts["lm_replies"]}


def stage_loop(args, gym_cls, write, load_previous) -> None:
    out = REPO / args.out
    out.mkdir(parents=True, exist_ok=True)
    # a 1.5B on 2 CPU cores answers in minutes: the prompt config's 60 s default would time every call out
    arms = {"offline": {}, "lm": {"prompt": {"reflection_lm": args.model, "api_base": args.api_base,
                                             "timeout_s": 900}}}
    arms = {k: v for k, v in arms.items() if k in args.arms.split(",")}
    prev = (load_previous().get("results") or {}).get("loop", {}).get("runs", {})
    rows = {k: v for k, v in prev.items() if v["arm"] not in arms}  # the other arm's finished runs stay
    gym = gym_cls(args.heldout, args.seed, args.policy)
    try:
        for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
            for arm, extra in arms.items():
                name = f"{arm}-{ARM}"
                rec = run_one(out, _config(out, name, extra, args.budget), name, seed)
                facts = _lineage_facts(out / f"{name}-s{seed}.db", name)
                rows[f"{arm}-s{seed}"] = {"arm": arm, **_summary(rec, facts, gym)}
                r = rows[f"{arm}-s{seed}"]
                print(f"# {arm} seed {seed}: pass@1 {r['start_pass@1']:.3f} -> {r['end_pass@1']:.3f}, "
                      f"{r['promotions']} promoted, final lessons {r['final_lessons']!r}", flush=True)
    finally:
        gym.close()
    write("loop", args, {"runs": rows, "base_pass@1": gym.cache.get("", {}).get("pass@1")}, _figures(rows))


def _figures(rows: dict) -> dict:
    figs = {}
    for arm in ("offline", "lm"):
        rs = [r for r in rows.values() if r["arm"] == arm]
        if not rs:
            continue
        figs[f"{arm}_runs"] = len(rs)
        figs[f"{arm}_start_pass_at_1"] = round(sum(r["start_pass@1"] for r in rs) / len(rs), 4)
        figs[f"{arm}_end_pass_at_1"] = round(sum(r["end_pass@1"] for r in rs) / len(rs), 4)
        figs[f"{arm}_promotions"] = sum(r["promotions"] for r in rs)
        effects = [e["delta_points"] for r in rs for e in r["promoted"]]
        figs[f"{arm}_promoted_changes_nothing"] = sum(abs(d) < 2 for d in effects)
        figs[f"{arm}_promoted_helps"] = sum(d >= 2 for d in effects)
        figs[f"{arm}_boundary_promoted"] = sum("include the boundary value k" in e["lessons"].lower()
                                               for r in rs for e in r["promoted"])
    return figs
