"""Type-check evolve/ and fail on any error beyond the per-module baseline (CI's typecheck step).

    python scripts/typecheck.py            # check; exit 1 naming each module with new errors
    python scripts/typecheck.py --update   # rewrite the baseline after fixing errors (never to add some)

The checker is mypy (chosen by measurement: docs/architecture.md, "Type checking"), run with the
project's interpreter so it sees the installed libraries. The baseline (.ci/typecheck-baseline.json)
counts the errors each module had when the step was added; a module may only go down. A module
below its count is reported so the baseline can be tightened with --update.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / ".ci" / "typecheck-baseline.json"
ERROR = re.compile(r"^(evolve/[^:]+\.py):\d+: error: ")


def run_checker(python: str) -> tuple[Counter, float, str]:
    """mypy (settings in pyproject.toml, [tool.mypy]) over evolve/, resolving imports in ``python``."""
    cmd = [sys.executable, "-m", "mypy", "--python-executable", python, "--no-error-summary",
           "--cache-dir", str(ROOT / ".mypy_cache"), "evolve"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if proc.returncode not in (0, 1):  # 2: mypy itself failed (bad flag, crash), not a type error
        raise SystemExit(f"typecheck: mypy failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}")
    counts = Counter(m.group(1) for line in proc.stdout.splitlines() if (m := ERROR.match(line)))
    return counts, took, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write the current counts as the baseline")
    ap.add_argument("--python", default=sys.executable, help="interpreter whose libraries mypy sees")
    args = ap.parse_args()
    counts, took, out = run_checker(args.python)
    if args.update:
        BASELINE.write_text(json.dumps(dict(sorted(counts.items())), indent=1) + "\n")
        print(f"typecheck: baseline written: {sum(counts.values())} errors in {len(counts)} modules ({took:.0f} s)")
        return 0
    allowed = json.loads(BASELINE.read_text())
    worse = {m: (n, allowed.get(m, 0)) for m, n in counts.items() if n > allowed.get(m, 0)}
    better = {m: (counts.get(m, 0), n) for m, n in allowed.items() if counts.get(m, 0) < n}
    for m, (n, base) in sorted(worse.items()):
        print(f"typecheck: {m}: {n} errors, baseline {base}")
        for line in out.splitlines():
            if line.startswith(f"{m}:"):
                print(f"  {line}")
    if better:
        print(f"typecheck: {len(better)} module(s) below the baseline: run scripts/typecheck.py --update")
    print(f"typecheck: {sum(counts.values())} errors in {len(counts)} modules, baseline "
          f"{sum(allowed.values())}; {'FAILED: new errors' if worse else 'ok'} ({took:.0f} s)")
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
