"""Content hashes: every identity in the lineage is a sha256 of canonical bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal objects give equal bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default)


def _default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, tuple):
        return list(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def content_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj``. A lone surrogate (model text kept as emitted) has no
    UTF-8 form; ``surrogatepass`` gives it a fixed one and leaves every valid text's bytes unchanged."""
    return sha256_bytes(canonical_json(obj).encode("utf-8", "surrogatepass"))
