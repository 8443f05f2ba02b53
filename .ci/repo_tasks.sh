#!/usr/bin/env bash
# CI stage (network: two pinned sdists from PyPI, sha256-checked): the repo-fix smoke.
#   1. `evolve repo-tasks build` for one train and one held-out package, one task each, then the
#      same build offline from the sdist cache (the same tasks, timings aside);
#   2. `evolve eval` on repo-fix (held-out, 1 task x 1 sample, 2 turns) with the small embedded model;
#   3. a 1-generation `evolve run` (configs/repo-fix-ci.toml) on the train task, into a fresh lineage.
# The small model writes no valid tool call: this checks the path (tools, sandboxed pytest runs, the
# hidden grade, update, lineage), not learning. The default pytest run needs none of this (tests/repo
# builds from a package vendored under tests/repo/data).
# Measured on the shared 2-core machine: about 2 minutes (see the `ci:` lines it prints).
# PY: the interpreter (default .venv/bin/python; from a worktree: PY=/path/.venv/bin/python PYTHONPATH=$PWD).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
start=$(date +%s)
out=${EVOLVE_REPO_TASKS_DIR:-runs/repo-tasks-ci}
rm -rf "$out/lineage.db" "$out/tasks.jsonl"
build=(-m evolve repo-tasks build --out "$out" --only inflection,wcwidth --per-package 1 --max-tries 6)
"$PY" "${build[@]}"
cp "$out/tasks.jsonl" "$out/tasks.first.jsonl"
echo "ci: repo-tasks build took $(( $(date +%s) - start ))s"
"$PY" "${build[@]}" --offline >/dev/null
"$PY" - "$out/tasks.first.jsonl" "$out/tasks.jsonl" <<'PYEOF'
import json, sys
def rows(p):  # meta.verify_s is the build's measured time, the one field that may differ
    out = [json.loads(line) for line in open(p)]
    for r in out:
        r["meta"].pop("verify_s", None)
    return out
assert rows(sys.argv[1]) == rows(sys.argv[2]), "the offline rebuild made other tasks"
PYEOF
echo "ci: offline rebuild from the cache gave the same tasks"
export EVOLVE_REPO_TASKS="$out/tasks.jsonl"
t=$(date +%s)
"$PY" -m evolve eval --policy policies/tiny-coder-ci.toml --suite repo-fix --split heldout --samples 1 --k 1 \
  --tasks 1 --max-turns 2 --json > "$out/eval.json"
"$PY" - "$out/eval.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["n_tasks"] == 1 and r["max_turns"] == 2 and sum(r["turns"].values()) == 1, r
print(f"ci: repo-fix eval ok: pass@1={r['overall']['pass@1']} turns={r['turns']}")
PYEOF
echo "ci: repo-fix eval took $(( $(date +%s) - t ))s"
t=$(date +%s)
"$PY" -m evolve run --config configs/repo-fix-ci.toml --db "$out/lineage.db" --name repo-fix-ci
"$PY" -m evolve runs --db "$out/lineage.db" --json > "$out/runs.json"
"$PY" - "$out/runs.json" <<'PYEOF'
import json, sys
(run,) = json.load(open(sys.argv[1]))
assert run["name"] == "repo-fix-ci" and run["committed"] == 2 and run["failed"] == 0, run
assert run["verifier_isolation"].startswith("bwrap+seccomp"), run  # the repo runner's sandbox level
print(f"ci: repo-fix run ok: {run['committed']} generations committed, sandbox {run['verifier_isolation']!r}")
PYEOF
echo "ci: repo-fix run (1 generation) took $(( $(date +%s) - t ))s"
echo "ci: repo-fix stage total $(( $(date +%s) - start ))s"
