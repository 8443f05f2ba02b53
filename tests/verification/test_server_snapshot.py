"""The sandbox server's code is what the parent process loaded, not what is on disk at the next server
start: a long run whose checkout is updated under it (a pull, a merge) must keep verifying with one
protocol. Before, every server started after such an update spoke the new protocol to the old parent,
and each later verdict was a forged-result hack (a Qwen run's held-out fell from 3/8 to 0/8)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys
from pathlib import Path
from evolve.verification.sandbox.client import ForkServer, SandboxConfig

server_py = Path(sys.argv[1]) / "evolve" / "verification" / "sandbox" / "server.py"
# the checkout changes after the parent loaded its code (a server running this exits at once)
server_py.write_text("raise SystemExit('server.py as edited on disk')\n" + server_py.read_text())
job = {"mode": "run", "src": "def f(a, b):\n    return a + b\n", "entry": "f", "calls": [(1, 2)], "timeout": 5, "cpu": 2}
fs = ForkServer(SandboxConfig(jobs=1))
try:
    fs.ready()  # the first server starts only now, after the edit
    r = fs.run([job])[0]
finally:
    fs.close()
print(json.dumps({"lines": r["lines"], "flags": r["flags"], "forged": r["forged"]}))
"""


def test_a_server_started_after_the_files_changed_runs_the_loaded_code(tmp_path):
    shutil.copytree(REPO / "evolve", tmp_path / "evolve", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"lines": ["L ok", "R 0 ok 3", "END"], "flags": [], "forged": 0}, got
