"""A disk cache of generated gym splits, so that each `evolve` process does not rebuild all ~3,000
tasks (about 2 s of CPU per process start, a fifth of a CI-sized `evolve run`; the test suite starts
such processes about a hundred times).

The key covers everything the tasks depend on: the split, the seed, the generator parameters and the
source of every module in evolve/gym/ plus the Task types, so any change to the generator makes a new
file. Files hold plain values through ``marshal`` (exact for tuples, lists, dicts, str, int, float, bool,
None; it never runs code, unlike pickle). A file that cannot be read or decoded is ignored and rebuilt;
writes go through a temporary file and ``os.replace``, so concurrent processes never see half a file.
``EVOLVE_GYM_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from evolve.verification import types as vtypes
from evolve.verification.types import Task, TestCase

_FORMAT = 1
_SOURCES = (Path(__file__).resolve().parent, Path(vtypes.__file__).resolve())


def _source_digest() -> str:
    h = hashlib.sha256()
    for root in _SOURCES:
        for path in sorted(root.glob("*.py")) if root.is_dir() else [root]:
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_dir() -> Path:
    """<runs>/cache/gym, where <runs> is ``$EVOLVE_RUNS_DIR`` or ./runs (like the model cache)."""
    return Path(os.environ.get("EVOLVE_RUNS_DIR") or "runs") / "cache" / "gym"


def _key(split: str, seed: int, params) -> str:
    facts = repr((_FORMAT, sys.version_info[:2], split, seed, tuple(params.model_dump().values()), _source_digest()))
    return hashlib.sha256(facts.encode()).hexdigest()[:24]


def _case(t: TestCase) -> tuple:
    return (t.inputs, t.expected, t.compare, t.tol)


def _encode(tasks: list[Task]) -> bytes:
    return marshal.dumps([(t.task_id, t.prompt, t.entry_point, [_case(c) for c in t.visible_tests],
                           [_case(c) for c in t.hidden_tests], t.check_code, t.canonical_solution, t.suite,
                           t.meta) for t in tasks])


def _decode(data: bytes) -> list[Task]:
    return [Task(tid, prompt, entry, tuple(TestCase(*c) for c in vis), tuple(TestCase(*c) for c in hid),
                 check_code, canonical, suite, meta)
            for tid, prompt, entry, vis, hid, check_code, canonical, suite, meta in marshal.loads(data)]


def cached_tasks(split: str, seed: int, params, build: Callable[[], list[Task]]) -> list[Task]:
    """``build()``'s tasks, read from the cache when an entry for exactly these inputs exists."""
    if os.environ.get("EVOLVE_GYM_CACHE", "1") == "0":
        return build()
    path = cache_dir() / f"{split}-{seed}-{_key(split, seed, params)}.marshal"
    try:
        return _decode(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        pass  # absent, or unreadable: build it
    tasks = build()
    try:
        data = _encode(tasks)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except (OSError, ValueError):  # a read-only folder, or a value marshal cannot hold: no cache, same tasks
        pass
    return tasks
