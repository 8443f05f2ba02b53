"""Every benchmark results file names the CPU it ran on (speed figures differ several-fold between an
AMX machine and an AVX2-only one): benchmarks/results_io.py writes evolve.util.cpu.cpu_kind() into it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evolve.util.cpu import cpu_kind

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import results_io  # noqa: E402


def test_a_results_file_records_the_cpu_kind(tmp_path):
    path = results_io.write_results("probe", args={}, results=[], figures={"x": 1}, out_dir=tmp_path)
    machine = json.loads(path.read_text())["machine"]
    assert machine["cpu"] == cpu_kind() and machine["cores"] >= 1
