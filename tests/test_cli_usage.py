"""Usage errors of the real `evolve` CLI (an unknown option or command, an option in the wrong
place, a bad value) are one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args,needle", [
    (["run", "--bogus"], "No such option: --bogus"),
    (["--db", "sqlite:///x.db", "run"], "No such option: --db"),
    (["nosuchcmd"], "No such command 'nosuchcmd'"),
    (["run", "--generations", "many"], "Invalid value for '--generations'"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, needle):
    proc = subprocess.run([sys.executable, "-m", "evolve", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and needle in lines[0] and "Traceback" not in proc.stderr
