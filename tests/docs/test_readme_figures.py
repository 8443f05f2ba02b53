"""The docs' generated blocks (README headline, docs/results.md, docs/ablation.md's arm tables) come from
benchmarks/results/*.json and must agree with them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = [sys.executable, str(REPO / "scripts" / "readme_figures.py")]
DOCS = ("README.md", "docs/results.md", "docs/ablation.md")


def check(root: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*SCRIPT, "--check", "--root", str(root), "--results", str(results)],
                          capture_output=True, text=True, timeout=60)


def copy_docs(tmp_path: Path) -> tuple[Path, Path]:
    root, results = tmp_path / "repo", tmp_path / "results"
    for rel in DOCS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, root / rel)
    shutil.copytree(REPO / "benchmarks" / "results", results)
    return root, results


def test_docs_agree_with_the_committed_results():
    proc = check(REPO, REPO / "benchmarks" / "results")
    assert proc.returncode == 0, proc.stderr


def test_readme_quotes_no_raw_keys_and_stays_short():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 260
    assert "agents_seed1:" not in readme and "_pass_at_1" not in readme
    results = (REPO / "docs" / "results.md").read_text()
    assert "| agents_seed1: `" not in results and "repair3_shared_anchor_share" not in results


def test_a_changed_figure_or_a_new_file_fails_the_check_and_regenerates(tmp_path):
    root, results = copy_docs(tmp_path)
    assert check(root, results).returncode == 0
    doc = json.loads((results / "grpo_step.json").read_text())
    doc["figures"]["update_ratio_vs_trl_8x8"] = 123.456  # quoted in the README headline and docs/results.md
    (results / "grpo_step.json").write_text(json.dumps(doc))
    proc = check(root, results)
    assert proc.returncode == 1 and "README.md" in proc.stderr and "docs/results.md" in proc.stderr
    assert "docs/ablation.md" not in proc.stderr and "Traceback" not in proc.stderr
    # regenerating writes the new value; a results file another benchmark adds later shows up too
    (results / "newbench.json").write_text(json.dumps({"benchmark": "newbench", "commit": "abc", "figures":
                                                       {"speed_ratio": 2.5}, "machine": {"loadavg": [1.0]}}))
    subprocess.run([*SCRIPT, "--root", str(root), "--results", str(results)], check=True, timeout=60)
    assert "123.5" in (root / "README.md").read_text()
    text = (root / "docs" / "results.md").read_text()
    assert "123.5" in text and "### newbench" in text and "| `speed_ratio` | 2.5× |" in text
    assert check(root, results).returncode == 0
    (results / "newbench.json").unlink()  # a deleted results file takes its rows with it
    assert check(root, results).returncode == 1


def test_an_arm_figure_changes_the_ablation_page(tmp_path):
    root, results = copy_docs(tmp_path)
    doc = json.loads((results / "ablation_fresh2.json").read_text())
    doc["results"]["summary"]["weights-only"]["final_pass@1_mean"] = 0.999
    (results / "ablation_fresh2.json").write_text(json.dumps(doc))
    proc = check(root, results)
    assert proc.returncode == 1 and "docs/ablation.md" in proc.stderr
    subprocess.run([*SCRIPT, "--root", str(root), "--results", str(results)], check=True, timeout=60)
    assert "| weights-only (GRPO alone) `weights-only` | 0.999 ± " in (root / "docs" / "ablation.md").read_text()


def test_missing_markers_are_one_line(tmp_path):
    root, results = copy_docs(tmp_path)
    (root / "docs" / "results.md").write_text("# no markers\n")
    proc = check(root, results)
    assert proc.returncode == 1 and "docs/results.md has no results markers" in proc.stderr
    assert "Traceback" not in proc.stderr
