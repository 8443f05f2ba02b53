"""The task factory on the vendored minicalc sdist: real injection, real sandboxed pytest runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evolve.repo.factory import BuildParams, build_package, load_repo_tasks
from evolve.repo.inject import injections
from evolve.repo.packages import load_packages
from evolve.repo.runner import run_tests


def _work(env_out: Path, task, dest: Path) -> Path:
    pristine = env_out / "cache" / "src" / "minicalc-0.1"
    shutil.copytree(pristine, dest)
    (dest / task.meta["file"]).write_text(task.meta["buggy_source"])
    return dest


def test_each_task_fails_its_f2p_and_passes_its_p2p_when_run_again(minicalc_build, tmp_path):
    out, report = minicalc_build
    tasks = load_repo_tasks(out / "tasks.jsonl")
    assert report["packages"][0]["kept"] == len(tasks) >= 2
    pkg = report["packages"][0]  # each kept task: its runs' CPU time (wait4), beside the wall time
    assert len(pkg["verify_cpu_s"]) == len(pkg["verify_s"]) == len(tasks) and all(c > 0.05 for c in pkg["verify_cpu_s"])
    pristine = out / "cache" / "src" / "minicalc-0.1"
    for i, t in enumerate(tasks):
        f2p, p2p = t.meta["fail_to_pass"], t.meta["pass_to_pass"]
        assert f2p and p2p and not set(f2p) & set(p2p)
        buggy = run_tests(pristine, _work(out, t, tmp_path / f"w{i}"), f2p + p2p, ["/repo"])
        assert buggy.complete
        assert not any(buggy.passed(n) for n in f2p)
        assert all(buggy.passed(n) for n in p2p)
        clean = run_tests(pristine, None, f2p + p2p, ["/repo"])
        assert all(clean.passed(n) for n in f2p + p2p)


def test_the_statement_names_the_failing_tests_and_never_quotes_the_fix(minicalc_build):
    out, _ = minicalc_build
    for t in load_repo_tasks(out / "tasks.jsonl"):
        assert all(n in t.prompt for n in t.meta["fail_to_pass"][:10])
        assert "AssertionError" in t.prompt or "assert" in t.prompt
        removed = [ln[1:].strip() for ln in t.meta["diff"].splitlines() if ln.startswith("-") and not ln.startswith("---")]
        assert removed and not any(r in t.prompt for r in removed if len(r) >= 4)
        assert t.meta["diff"] not in t.prompt


def test_the_build_is_deterministic_under_the_seed(minicalc_build, tmp_path, make_packages_toml):
    out, _ = minicalc_build
    first = [json.loads(ln) for ln in (out / "tasks.jsonl").read_text().splitlines()]
    (spec,) = load_packages(make_packages_toml(tmp_path))
    again, _ = build_package(spec, tmp_path / "cache", BuildParams(seed=0, per_package=2, max_tries=8))
    strip = [{k: v for k, v in d["meta"].items() if k != "verify_s"} | {"id": d["task_id"], "p": d["prompt"]}
             for d in first]
    assert strip == [{k: v for k, v in t.meta.items() if k != "verify_s"} | {"id": t.task_id, "p": t.prompt}
                     for t in again]


def test_split_is_by_package(minicalc_build, tmp_path, make_packages_toml):
    from evolve.env.repo_fix import load_environment

    out, _ = minicalc_build
    splits = load_environment(repo_tasks=str(out / "tasks.jsonl")).splits()
    assert splits["heldout"] == [] and splits["train"]
    (held,) = load_packages(make_packages_toml(tmp_path, split="heldout"))
    assert held.split == "heldout"
    shipped = load_packages(Path(__file__).resolve().parents[2] / "verifiers" / "repo_packages.toml")
    by_split = {s.split for s in shipped}
    assert by_split == {"train", "heldout"} and len(shipped) >= 8
    assert all(s.license in ("MIT", "BSD-3-Clause") for s in shipped)


def test_injection_has_the_non_trivial_operators_and_keeps_the_rest_of_the_file():
    src = (Path(__file__).parent / "data" / "minicalc-0.1" / "minicalc" / "__init__.py").read_text()
    found = injections("minicalc/__init__.py", src)
    ops = {i.operator for i in found}
    assert {"drop-branch", "swap-args", "swap-cmp"} <= ops
    for i in found:
        changed = [ln for ln in i.diff(src).splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
        assert changed and len(changed) <= 4, i
        assert '"""minicalc: a few small functions' in i.source  # the module docstring is never touched


def test_cli_bad_input_is_one_line_exit_2(tmp_path, make_packages_toml):
    import subprocess
    import sys

    toml = make_packages_toml(tmp_path)
    repo = Path(__file__).resolve().parents[2]
    for args, needle in ((["--packages", str(tmp_path / "missing.toml")], "package list not found"),
                         (["--packages", str(toml), "--only", "nope"], "unknown package"),
                         (["--packages", str(toml), "--offline", "--only", "minicalc", "--out", str(tmp_path / "o")],
                          None)):
        proc = subprocess.run([sys.executable, "-m", "evolve", "repo-tasks", "build", *args, "--per-package", "0"],
                              capture_output=True, text=True, cwd=repo, timeout=120)
        if needle is None:  # a local sdist builds offline (no task asked for: only the baseline runs)
            assert proc.returncode == 0 and "tasks=0" in proc.stdout, proc.stderr
            continue
        assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
