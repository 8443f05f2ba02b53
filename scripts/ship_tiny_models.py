"""Rewrite the tiny-coder models shipped in the package (evolve/policy/tiny/shipped/), after a change to a
preset or to the builder: `python scripts/ship_tiny_models.py RUNS_DIR [preset ...]` (default: every preset).
A preset already built under RUNS_DIR/models is copied as it is; otherwise it is built there first
(the default preset: about 9 minutes on 2 cores). Delete the old hash's folder by hand."""

import sys
from pathlib import Path

from evolve.policy.tiny.config import PRESETS
from evolve.policy.tiny.shipped import ship

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: ship_tiny_models.py RUNS_DIR [preset ...]")
    for name in sys.argv[2:] or sorted(PRESETS):
        print(f"shipped {name}: {ship(name, Path(sys.argv[1]))}")
