"""Fixtures for the repo-fix tests: the vendored ``minicalc`` package (tests/repo/data, written for
these tests, MIT) as an sdist, and the tasks the real factory builds from it (real bwrap, real pytest)."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest

collect_ignore = ["data"]  # the vendored package's own tests run only inside the sandbox
DATA = Path(__file__).parent / "data" / "minicalc-0.1"


def make_sdist(dest: Path) -> Path:
    sdist = dest / "minicalc-0.1.tar.gz"
    with open(sdist, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz, \
            tarfile.open(fileobj=gz, mode="w") as tar:  # byte-identical every time (pinned sha256)
        for p in sorted(DATA.rglob("*")):
            if "__pycache__" in p.parts:
                continue
            info = tar.gettarinfo(str(p), arcname="minicalc-0.1/" + p.relative_to(DATA).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if p.is_file():
                with open(p, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return sdist


def packages_toml(dest: Path, split: str = "train", name_suffix: str = "") -> Path:
    sdist = make_sdist(dest)
    sha = hashlib.sha256(sdist.read_bytes()).hexdigest()
    toml = dest / "packages.toml"
    toml.write_text(f'''[[package]]
name = "minicalc"
version = "0.1"
sha256 = "{sha}"
license = "MIT"
python_path = ["."]
source = ["minicalc/__init__.py"]
tests = ["tests"]
split = "{split}"
path = "{sdist.name}"
''')
    return toml


@pytest.fixture(scope="session")
def minicalc_build(tmp_path_factory):
    """(out folder, report) of one real factory build of minicalc (seed 0, 2 tasks)."""
    from evolve.repo.factory import BuildParams, build
    from evolve.repo.packages import load_packages

    root = tmp_path_factory.mktemp("minicalc")
    specs = load_packages(packages_toml(root))
    out = root / "out"
    report = build(specs, out, BuildParams(seed=0, per_package=2, max_tries=8))
    return out, report


@pytest.fixture
def env(minicalc_build):
    from evolve.env.repo_fix import load_environment

    out, _ = minicalc_build
    return load_environment(max_turns=6, repo_tasks=str(out / "tasks.jsonl"))


def fresh_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.fixture
def make_packages_toml():
    return packages_toml
