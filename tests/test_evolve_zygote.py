"""The test support that forks `evolve` commands from warm parents (tests/evolve_zygote.py) behaves
as a cold `python -m evolve` where the tests depend on it: the same output and exit code, the
command's own working directory and environment, and its own session (kill -9 of the group)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import evolve_zygote

REPO = evolve_zygote.REPO


def test_a_forked_command_prints_and_exits_as_a_cold_one(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[loop]\ngenerations = -1\n")
    args = ["run", "--config", str(bad), "--db", f"sqlite:///{tmp_path / 'l.db'}"]
    cold = subprocess.run([sys.executable, "-m", "evolve", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    forked = evolve_zygote.run(args, dict(os.environ))
    assert cold.returncode == forked.returncode == 2
    assert forked.stderr == cold.stderr and forked.stdout == cold.stdout and "error:" in forked.stderr


def test_the_command_gets_its_directory_and_environment(tmp_path):
    env = {**os.environ, "EVOLVE_DB": "sqlite:///from-env.db"}
    proc = evolve_zygote.run(["runs"], env, cwd=tmp_path)
    assert proc.returncode == 2 and f"no lineage database at {tmp_path / 'from-env.db'}" in proc.stderr


def test_the_command_leads_its_own_session_and_dies_with_its_group(tmp_path):
    log = tmp_path / "log"
    proc = evolve_zygote.popen(["run", "--config", "configs/ci.toml", "--db", f"sqlite:///{tmp_path / 'l.db'}"],
                               dict(os.environ), log=log)
    assert proc.poll() is None and os.getsid(proc.pid) == proc.pid
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(60) == -signal.SIGKILL
