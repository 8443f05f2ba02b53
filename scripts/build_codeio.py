"""Builds CodeI/O tasks offline (evolve/env/codeio.py): reasoning-gym's problems, each reference run in the sandbox.

    .venv/bin/python scripts/build_codeio.py --problems 600 --seed 0 --out runs/codeio/tasks.jsonl

Writes one task row per kept problem (the ordinary task schema: `evolve run --suite FILE`) and prints how
many were dropped and why, and the file's sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evolve.env.codeio import build_tasks, data_path, pick, read_problems  # noqa: E402
from evolve.errors import EvolveError  # noqa: E402
from evolve.verification import Verifier, load_pipeline  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=600, help="problems drawn (those whose reference fails are dropped)")
    ap.add_argument("--seed", type=int, default=0, help="which problems, inputs and directions")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "codeio" / "tasks.jsonl")
    args = ap.parse_args()
    try:
        problems = pick(read_problems(data_path()), args.problems, args.seed)
        t0 = time.perf_counter()
        with Verifier(load_pipeline(REPO / "verifiers" / "codeio.toml"), jobs=2) as verifier:
            tasks, dropped = build_tasks(verifier, problems, args.seed)
    except EvolveError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(t.to_dict(), sort_keys=True) + "\n" for t in tasks)
    args.out.write_text(text)
    directions = sum(t.meta["answer"] == "input" for t in tasks)
    print(f"{len(tasks)} tasks of {len(problems)} problems ({directions} input, {len(tasks) - directions} output "
          f"prediction) in {time.perf_counter() - t0:.0f} s; dropped {dropped}; {args.out} "
          f"sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
