"""The README's figures table is generated from benchmarks/results/*.json and must agree with them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = [sys.executable, str(REPO / "scripts" / "readme_figures.py")]


def check(readme: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*SCRIPT, "--check", "--readme", str(readme), "--results", str(results)],
                          capture_output=True, text=True, timeout=60)


def test_readme_table_agrees_with_the_committed_results():
    proc = check(REPO / "README.md", REPO / "benchmarks" / "results")
    assert proc.returncode == 0, proc.stderr


def test_a_changed_figure_or_a_new_file_fails_the_check_and_regenerates(tmp_path):
    readme, results = tmp_path / "README.md", tmp_path / "results"
    shutil.copy(REPO / "README.md", readme)
    shutil.copytree(REPO / "benchmarks" / "results", results)
    assert check(readme, results).returncode == 0
    doc = json.loads((results / "grpo_step.json").read_text())
    key = next(iter(doc["figures"]))
    doc["figures"][key] = 123.456
    (results / "grpo_step.json").write_text(json.dumps(doc))
    proc = check(readme, results)
    assert proc.returncode == 1 and "disagrees" in proc.stderr and "Traceback" not in proc.stderr
    # regenerating writes the new value; a results file another benchmark adds later shows up too
    (results / "newbench.json").write_text(json.dumps({"benchmark": "newbench", "commit": "abc", "figures":
                                                       {"speed_ratio": 2.5}, "machine": {"loadavg": [1.0]}}))
    subprocess.run([*SCRIPT, "--readme", str(readme), "--results", str(results)], check=True, timeout=60)
    text = readme.read_text()
    assert "123.5" in text and "| newbench: `speed_ratio` | 2.5× |" in text
    assert check(readme, results).returncode == 0
    # a deleted results file takes its rows with it
    (results / "newbench.json").unlink()
    assert check(readme, results).returncode == 1
