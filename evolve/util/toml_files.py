"""TOML files that extend another: ``extends = "other.toml"`` states only the differences.

The other file (a path relative to the extending one) is read first, with its own ``extends``; the
extending file's keys are merged over it, table by table (a table merges key by key, any other
value, arrays included, replaces). A policy spec or a loop config that differs from a shipped one in
one field is then one line, and what a run records is always the resolved whole.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from evolve.errors import ConfigError

MAX_DEPTH = 16  # an extends chain longer than this is surely a mistake


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged onto ``base``: tables key by key, everything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def read_toml(path: str | Path, not_found: str = "not found", malformed: str = "malformed TOML") -> dict[str, Any]:
    """``path`` as a dict with its ``extends`` chain resolved. One-line ConfigError for a missing or
    malformed file anywhere in the chain (``not_found`` / ``malformed`` word it as the caller always
    has), a non-string ``extends``, or a cycle."""
    return _read(Path(path), [], not_found, malformed)


def _read(path: Path, chain: list[Path], not_found: str, malformed: str) -> dict[str, Any]:
    where = " (extended by " + " <- ".join(str(p) for p in reversed(chain)) + ")" if chain else ""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: {not_found}{where}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}{where}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {malformed}: {e}{where}") from None
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{path}: extends must be a file name (a string), got {parent!r}")
    target = (path.parent / parent).resolve()
    seen = [p.resolve() for p in (*chain, path)]
    if target in seen:
        raise ConfigError(f"{path}: extends {parent!r} makes a cycle ({' -> '.join(str(p) for p in (*chain, path))} "
                          f"-> {parent})")
    if len(seen) >= MAX_DEPTH:
        raise ConfigError(f"{path}: extends chain longer than {MAX_DEPTH} files")
    return merge(_read(path.parent / parent, [*chain, path], not_found, malformed), data)
