"""Pinned sdists (``verifiers/repo_packages.toml``): load the list, fetch each sdist once into a cache
(``pip download``, the ordinary client, only when the cache lacks it), check its sha256, unpack it
into a pristine tree. After one build everything is offline: the cache is the source of truth.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import Field

from evolve.errors import ConfigError, EvolveError
from evolve.util.config_model import ConfigModel, validate_as
from evolve.util.hashing import sha256_file


class PackageSpec(ConfigModel):
    """One pinned sdist and how its tests run (a ``[[package]]`` table)."""

    name: str = Field(description="distribution name on PyPI")
    version: str = Field(description="exact version (pinned)")
    sha256: str = Field(description="sha256 of the sdist file; a download that differs is refused")
    license: str = Field(description="licence as the sdist states it (permissive only)")
    python_path: list[str] = Field(default=["."], description="folders inside the sdist put on PYTHONPATH")
    source: list[str] = Field(description="source files bugs are injected into (relative to the sdist root)")
    tests: list[str] = Field(description="test files or folders the factory selects tests from")
    split: Literal["train", "heldout"] = Field(default="train", description="train or heldout, by package")
    path: str | None = Field(default=None, description="a local sdist (relative to the TOML) instead of PyPI")

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


class PackagesFile(ConfigModel):
    """A package list file: ``[[package]]`` tables."""

    package: tuple[PackageSpec, ...] = Field((), strict=False, description="The pinned sdists, one table each.")


def load_packages(path: str | Path) -> list[PackageSpec]:
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"package list not found: {p}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: not valid TOML ({e})") from None
    specs = validate_as(PackagesFile, raw, str(p)).package
    if not specs:
        raise ConfigError(f"{p}: no [[package]] entries")
    base = p.resolve().parent  # a local sdist is relative to the file that names it
    return [s.model_copy(update={"path": str((base / s.path).resolve())}) if s.path is not None else s for s in specs]


def fetch(spec: PackageSpec, cache: Path, offline: bool = False) -> Path:
    """The sdist file in ``cache/sdists`` (downloaded with pip when missing), sha256 checked."""
    sdists = cache / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    if spec.path is not None:
        found = [Path(spec.path)]
    else:
        found = [p for p in sdists.iterdir() if _matches(p.name, spec)]
        if not found:
            if offline:
                raise EvolveError(f"{spec.key}: not in {sdists} and --offline was given")
            _pip_download(spec, sdists)
            found = [p for p in sdists.iterdir() if _matches(p.name, spec)]
    if not found:
        raise EvolveError(f"{spec.key}: pip download gave no sdist")
    got = sha256_file(found[0])
    if got != spec.sha256:
        raise EvolveError(f"{spec.key}: sha256 {got[:16]}... does not match the pinned {spec.sha256[:16]}...")
    return found[0]


def _matches(filename: str, spec: PackageSpec) -> bool:
    stem = filename.removesuffix(".tar.gz").removesuffix(".zip")
    return stem.replace("_", "-").lower() == spec.key.replace("_", "-").lower()


def _pip_download(spec: PackageSpec, dest: Path) -> None:
    env = dict(os.environ, PIP_CONSTRAINT="", PIP_DISABLE_PIP_VERSION_CHECK="1")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d", str(dest),
           f"{spec.name}=={spec.version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
        raise EvolveError(f"{spec.key}: pip download failed: {tail}")


def unpack(spec: PackageSpec, sdist: Path, cache: Path) -> Path:
    """The pristine tree ``cache/src/<name>-<version>`` (unpacked once; build metadata dropped)."""
    dest = cache / "src" / spec.key
    marker = cache / "src" / f"{spec.key}.sha256"  # beside the tree: nothing of ours inside the agent's copy
    if marker.exists() and marker.read_text() == spec.sha256:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    tmp = cache / "src" / f".{spec.key}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
    (top,) = [p for p in tmp.iterdir()]
    for junk in list(top.rglob("*.egg-info")) + list(top.rglob("__pycache__")):
        shutil.rmtree(junk, ignore_errors=True)
    top.rename(dest)
    shutil.rmtree(tmp, ignore_errors=True)
    marker.write_text(spec.sha256)
    return dest


def prepare(spec: PackageSpec, cache: Path, offline: bool = False) -> Path:
    return unpack(spec, fetch(spec, cache, offline), cache)
