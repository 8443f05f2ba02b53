"""Content-addressed artifact store: blobs at ``<root>/<sha[:2]>/<sha>``.

Every blob is written to a temp file in its final folder, fsynced, renamed, and
the folder fsynced; only then is it reported (``on_durable``) so its database row
never precedes the bytes. A folder (an HF checkpoint) is stored file by file plus a
JSON manifest blob ``{"format": MANIFEST_FORMAT, "files": {relpath: {"sha", "size"}}}``
whose sha names the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from evolve.errors import LineageError
from evolve.util.atomic import atomic_write_bytes
from evolve.util.hashing import canonical_json, sha256_bytes, sha256_file

MANIFEST_FORMAT = "evolve-manifest/1"
_CHUNK = 1 << 20


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ArtifactStore:
    """Blobs of one run. ``on_durable(sha, kind, size)`` records each one once it is on disk."""

    def __init__(self, root: str | Path, on_durable: Callable[[str, str, int], None] | None = None):
        self.root = Path(root)
        self._on_durable = on_durable

    def path(self, sha: str) -> Path:
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise LineageError(f"not an artifact sha256: {sha!r}")
        return self.root / sha[:2] / sha

    def exists(self, sha: str) -> bool:
        return self.path(sha).is_file()

    # -- writing -----------------------------------------------------------------------------
    def put_bytes(self, data: bytes, kind: str = "blob") -> str:
        sha = sha256_bytes(data)
        dest = self.path(sha)
        if not (dest.is_file() and dest.stat().st_size == len(data)):
            atomic_write_bytes(dest, data)
        self._durable(sha, kind, len(data))
        return sha

    def put_file(self, src: str | Path, kind: str = "blob") -> str:
        """Copy a file in, hashing while copying (large checkpoints are never held in memory)."""
        src = Path(src)
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".put.", suffix=".tmp", dir=self.root)
        h, size = hashlib.sha256(), 0
        try:
            with open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
                while block := fin.read(_CHUNK):
                    h.update(block)
                    fout.write(block)
                    size += len(block)
                fout.flush()
                os.fsync(fout.fileno())
            sha = h.hexdigest()
            dest = self.path(sha)
            if dest.is_file() and dest.stat().st_size == size:
                os.unlink(tmp)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, dest)
                _fsync_dir(dest.parent)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self._durable(sha, kind, size)
        return sha

    def put_json(self, obj, kind: str = "blob") -> str:
        return self.put_bytes(canonical_json(obj).encode("utf-8"), kind)

    def put_dir(self, src: str | Path) -> str:
        """Store every file under ``src``; returns the sha of the manifest naming them."""
        src = Path(src)
        if not src.is_dir():
            raise LineageError(f"not a folder: {src}")
        files = {}
        for p in sorted(src.rglob("*")):
            if p.is_file():
                rel = p.relative_to(src).as_posix()
                files[rel] = {"sha": self.put_file(p), "size": p.stat().st_size}
        return self.put_json({"format": MANIFEST_FORMAT, "files": files}, kind="manifest")

    def _durable(self, sha: str, kind: str, size: int) -> None:
        if self._on_durable is not None:
            self._on_durable(sha, kind, size)

    # -- reading -----------------------------------------------------------------------------
    def get_bytes(self, sha: str) -> bytes:
        p = self.path(sha)
        if not p.is_file():
            raise LineageError(f"artifact {sha[:12]} is missing from {self.root}")
        data = p.read_bytes()
        if sha256_bytes(data) != sha:
            raise LineageError(f"artifact {sha[:12]} in {self.root} is corrupt (hash mismatch)")
        return data

    def manifest(self, sha: str) -> dict:
        try:
            m = json.loads(self.get_bytes(sha))
        except ValueError:
            m = None
        if not isinstance(m, dict) or m.get("format") != MANIFEST_FORMAT:
            raise LineageError(f"artifact {sha[:12]} is not a folder manifest")
        return m

    def materialize_dir(self, sha: str, dest: str | Path) -> Path:
        """Rebuild a stored folder at ``dest`` (files verified as they are copied out)."""
        dest = Path(dest)
        for rel, entry in self.manifest(sha)["files"].items():
            target = dest / rel
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                raise LineageError(f"manifest {sha[:12]} names an unsafe path {rel!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            src = self.path(entry["sha"])
            if not src.is_file() or sha256_file(src) != entry["sha"]:
                raise LineageError(f"artifact {entry['sha'][:12]} ({rel}) is missing or corrupt")
            shutil.copyfile(src, target)
        return dest

    def verify(self, sha: str, manifest: bool | None = None) -> bool:
        """True if the blob exists and hashes right (and, for a manifest, every file it names)."""
        return not self.problems(sha, manifest)

    def problems(self, sha: str, manifest: bool | None = None) -> list[str]:
        """What is wrong with ``sha`` (empty when intact). ``manifest=None`` sniffs the content."""
        p = self.path(sha)
        if not p.is_file():
            return [f"artifact {sha} is missing ({p})"]
        if sha256_file(p) != sha:
            return [f"artifact {sha} is corrupt: its bytes hash differently ({p})"]
        if manifest is False:
            return []
        try:
            m = None
            if manifest or p.stat().st_size < (1 << 24):
                data = p.read_bytes()
                m = json.loads(data) if data[:1] == b"{" else None
        except ValueError:
            m = None
        if not (isinstance(m, dict) and m.get("format") == MANIFEST_FORMAT):
            return [f"artifact {sha} should be a folder manifest and is not"] if manifest else []
        out = []
        for rel, entry in m.get("files", {}).items():
            for problem in self.problems(entry["sha"], manifest=False):
                out.append(f"{problem} [file {rel} of folder {sha[:12]}]")
        return out
