"""Figures of a coupled run on a real model (configs/smollm2.toml, configs/qwen-humaneval.toml), read from its
lineage DB into a results file (``--results-name``: smollm2_run, qwen_humaneval_run).

    .venv/bin/evolve run --config configs/smollm2.toml --name smol-coupled --db sqlite:///runs/smol/lineage.db
    .venv/bin/python benchmarks/smollm2_run.py --db sqlite:///runs/smol/lineage.db --run smol-coupled

Records per committed generation: held-out pass@k (8 tasks x 8 samples, every generation), train reward,
proposals made/accepted, the update's statistics, the per-class attribution; the lessons of the newest
prompt; the wall time. The gain is the newest committed generation's held-out pass@1 (not --void) minus generation 0's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--run", default="smol-coupled")
    ap.add_argument("--results-name", default="smollm2_run")
    ap.add_argument("--note", default="", help="what the lineage cannot say (e.g. why a generation is void)")
    ap.add_argument("--void", default="", help="generation indexes whose held-out figures are void (kept in the "
                    "file, marked, and left out of the figures)")
    args = ap.parse_args()
    from evolve.lineage import LineageStore

    store = LineageStore.open(args.db, create=False, auto_upgrade=False)
    gens = [g for g in store.lineage(args.run) if g["status"] == "committed"]
    if not gens:
        raise SystemExit(f"run {args.run} has no committed generation")
    rows = []
    for g in gens:
        m = g["metrics"] or {}
        gen = store.get_generation(g["id"])
        rows.append({"generation": g["index"], "heldout": m.get("heldout"), "train_reward": m.get("train_reward"),
                     "proposals": m.get("proposals"), "accepted": m.get("accepted"),
                     "prompt_changed": m.get("prompt_changed"), "attribution": m.get("attribution"),
                     "update": m.get("update"), "prompt_version": g["prompt_version"],
                     "seconds": (gen.timings or {}).get("total") or (gen.timings or {}).get("heldout")})
    last = store.get_prompt_version(gens[-1]["prompt_version"]).components
    config = store.get_run(args.run).config
    void = {int(x) for x in args.void.split(",") if x.strip()}
    for r in rows:
        r["heldout_void"] = r["generation"] in void
    valid = [r for r in rows if not r["heldout_void"]]
    first, newest = valid[0]["heldout"], valid[-1]["heldout"]
    ks = [k for k in ("pass@1", "pass@4", "pass@8") if k in first]
    figures = {"generations_committed": len(rows) - 1, "generations_void": len(void), "heldout_tasks": first.get("tasks"),
               "heldout_samples": first.get("samples")}
    for k in ks:
        figures[f"base_{k}"] = round(first[k], 4)
        figures[f"last_{k}"] = round(newest[k], 4)
    figures["gain_pass@1"] = round(newest["pass@1"] - first["pass@1"], 4)
    figures["accepted_proposals"] = sum(r["accepted"] or 0 for r in rows[1:])
    figures["wall_s"] = round(sum(r["seconds"] or 0 for r in rows), 1)
    results = {"run": args.run, "generations": rows, "last_prompt": dict(last),
               "kept_lessons": [x for x in (last.get("lessons") or "").splitlines() if x.strip()],
               "loop_config": config["loop"], "policy_model": config["policy_spec"]["model"],
               "reflection_calls": reflection_calls(args.db, gens), "note": args.note}
    for r in rows:
        h = r["heldout"] or {}
        print(f"gen {r['generation']}: held-out " + " ".join(f"{k} {h.get(k, 0):.3f}" for k in ks)
              + f" | train reward {r['train_reward']} | accepted {r['accepted']}/{r['proposals']}")
    print(f"kept lessons: {results['kept_lessons'] or 'none'}")
    figures["reflection_calls"] = len(results["reflection_calls"])
    write_results(args.results_name, args=vars(args), results=results, figures=figures)
    print_figures(figures)


def reflection_calls(db: str, gens) -> list[dict]:
    """Every reflection LM call of the run: what the reflector wrote (an LM's drafts), its latency."""
    import json

    from sqlalchemy import bindparam, create_engine, text

    index = {g["id"]: g["index"] for g in gens}
    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("select generation_id, model, latency_s, tokens, error, response from lm_call "
                                     "where role = 'reflection' and model != 'offline' and generation_id in :ids "
                                     "order by id").bindparams(bindparam("ids", expanding=True)),
                                {"ids": list(index)}).fetchall()
    finally:
        engine.dispose()
    out = []
    for gid, model, latency, tokens, error, response in rows:
        response = json.loads(response) if isinstance(response, str) else response
        tokens = json.loads(tokens) if isinstance(tokens, str) else tokens
        out.append({"generation": index[gid], "model": model, "latency_s": round(latency, 1), "tokens": tokens,
                    "error": error, "drafts": [ch.get("content") for ch in (response or {}).get("choices", [])]})
    return out


if __name__ == "__main__":
    main()
