"""The repo-fix agent's tools, and how a reply becomes a tool call.

A reply holds one JSON object (bare or in a ```json fence): ``{"tool": NAME, ...arguments}``.
Every problem (no JSON, an unknown tool, a missing or mistyped argument, a path outside the copy,
an edit whose search text is not found exactly once, a path the file system refuses, text that is
not valid Unicode) is an observation starting with ``error:`` that says what to do; nothing here
raises on model output (``run_tool`` and ``replay_edits`` turn any error into one). Reading tools
touch only the working copy, from the parent process (no code runs); paths are resolved and must
stay inside the copy. Every tool is bounded: a reply, a path, an edited file and the bytes a search
scans have caps, and ``search`` matches with the ``regex`` package under a time limit (a pattern such
as ``(a|aa)+$`` backtracks exponentially in ``re``, which cannot be interrupted).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import regex

MAX_LINES = 120
MAX_LIST = 200
MAX_HITS = 40
MAX_REPLY = 1 << 16  # characters of a reply parsed for a tool call (a reply is a model's turn)
MAX_DECODES = 64  # JSON decodes tried per reply
MAX_PATH = 1024  # bytes of a path argument
MAX_FILE = 1 << 20  # bytes of a file an edit may write (editcheck refuses larger package files too)
MAX_PATTERN = 500  # characters of a search pattern
SEARCH_S = 2.0  # seconds one search may spend matching
MAX_REPEAT = 10_000  # product of a pattern's counted repetitions (compiling expands them: not time-limited)
MAX_SCAN = 8 << 20  # bytes one search reads
TOOLS = {
    "list": "list files: {\"tool\": \"list\", \"path\": \".\"}",
    "read": "read lines: {\"tool\": \"read\", \"path\": \"pkg/mod.py\", \"start\": 1, \"end\": 60}",
    "search": "search the source: {\"tool\": \"search\", \"pattern\": \"def name\"}",
    "edit": ("replace text that occurs exactly once: {\"tool\": \"edit\", \"path\": \"pkg/mod.py\", \"search\": \"old\", "
             "\"replace\": \"new\"}"),
    "test": "run tests: {\"tool\": \"test\", \"tests\": [\"tests/test_x.py::test_y\"]}",
    "submit": "finish: {\"tool\": \"submit\"}",
}


class ToolError(Exception):
    """A badly written tool call: its message becomes the observation."""


@dataclass
class Call:
    tool: str
    args: dict


def _fenced(reply: str) -> list[str]:
    """The ``{...}`` bodies of ```json fences, found in one pass (a regex with a lazy ``.*?`` between
    fences took 14 s on a 64 KiB reply of unclosed fences)."""
    out, i = [], 0
    while len(out) < MAX_DECODES:
        a = reply.find("```", i)
        b = reply.find("```", a + 3) if a >= 0 else -1
        if b < 0:
            return out
        body = reply[a + 3:b].removeprefix("json").strip()
        if body.startswith("{") and body.endswith("}"):
            out.append(body)
        i = b + 3
    return out


def parse_call(reply: str) -> Call:
    """The first JSON object with a ``tool`` key in ``reply``."""
    if not isinstance(reply, str) or len(reply) > MAX_REPLY:
        raise ToolError(f"the reply is longer than {MAX_REPLY} characters: one short tool call per reply")
    candidates: list = _fenced(reply)
    dec = json.JSONDecoder()
    starts = [i for i, ch in enumerate(reply) if ch == "{"][:MAX_DECODES]
    for i in starts:
        try:
            obj, _ = dec.raw_decode(reply[i:])
            candidates.append(obj)
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            continue
    for c in candidates:
        if isinstance(c, str):
            try:
                c = json.loads(c)
            except (ValueError, RecursionError):
                continue
        if isinstance(c, dict) and "tool" in c:
            name = c.get("tool")
            if name not in TOOLS:
                raise ToolError(f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")
            return Call(name, {k: v for k, v in c.items() if k != "tool"})
    raise ToolError("no tool call found: reply with one JSON object such as " + TOOLS["read"])


def arg(call: Call, name: str, kind: type, default=None):
    if name not in call.args:
        if default is not None:
            return default
        raise ToolError(f"{call.tool}: missing argument {name!r} (usage: {TOOLS[call.tool]})")
    v = call.args[name]
    if kind is int and isinstance(v, bool) or not isinstance(v, kind):
        raise ToolError(f"{call.tool}: argument {name!r} must be {kind.__name__} (usage: {TOOLS[call.tool]})")
    return v


def inside(root: Path, rel: str) -> Path:
    """``rel`` resolved inside ``root``; refuses absolute paths, ``..`` and links leading out."""
    if not rel or rel.startswith("/") or "\x00" in rel:
        raise ToolError(f"path {rel!r} must be relative to the repository root")
    try:
        size = len(rel.encode("utf-8"))
    except UnicodeEncodeError:
        raise ToolError(f"path {rel[:80]!r} is not valid Unicode text (a lone surrogate)") from None
    if size > MAX_PATH:
        raise ToolError(f"path is {size} bytes long (at most {MAX_PATH})")
    try:
        p = (root / rel).resolve()
    except (OSError, RuntimeError, ValueError) as e:
        raise ToolError(f"path {rel[:80]!r}: {type(e).__name__}: {e}") from None
    if p != root.resolve() and root.resolve() not in p.parents:
        raise ToolError(f"path {rel!r} is outside the repository")
    return p


def do_list(root: Path, call: Call) -> str:
    base = inside(root, arg(call, "path", str, "."))
    if not base.is_dir():
        raise ToolError(f"list: {call.args.get('path')!r} is not a folder")
    out = []
    for p in sorted(base.rglob("*")):
        if any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(root).parts):
            continue
        out.append(p.relative_to(root).as_posix() + ("/" if p.is_dir() else ""))
    more = f"\n... and {len(out) - MAX_LIST} more" if len(out) > MAX_LIST else ""
    return "\n".join(out[:MAX_LIST]) + more


def do_read(root: Path, call: Call) -> str:
    path = inside(root, arg(call, "path", str))
    if not path.is_file():
        raise ToolError(f"read: no file {call.args['path']!r} (use list)")
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = max(1, arg(call, "start", int, 1))
    end = min(len(lines), arg(call, "end", int, start + MAX_LINES - 1), start + MAX_LINES - 1)
    if start > len(lines):
        raise ToolError(f"read: the file has {len(lines)} lines")
    return "\n".join(f"{i:5d} {lines[i - 1]}" for i in range(start, end + 1))


def do_search(root: Path, call: Call) -> str:
    pattern = arg(call, "pattern", str)
    if not pattern or len(pattern) > MAX_PATTERN:
        raise ToolError(f"search: the pattern must be 1 to {MAX_PATTERN} characters")
    try:
        if _repeat_product(pattern) > MAX_REPEAT:
            raise ValueError("counted repetitions too large to compile in bounded time")
        rx = regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError):  # searched for as plain text instead
        rx = regex.compile(regex.escape(pattern))
    base = inside(root, arg(call, "path", str, "."))
    hits, budget = [], MAX_SCAN
    files = [base] if base.is_file() else sorted(base.rglob("*.py"))
    deadline = time.monotonic() + SEARCH_S
    for p in files:
        budget -= p.stat().st_size
        if budget < 0:
            raise ToolError(f"search: more than {MAX_SCAN} bytes to scan; give a smaller path")
        for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            try:
                found = rx.search(line, timeout=max(0.001, deadline - time.monotonic()))
            except TimeoutError:
                raise ToolError(f"search: the pattern took more than {SEARCH_S:g} s; search for a plain string "
                                "or a simpler pattern") from None
            if found:
                hits.append(f"{p.relative_to(root).as_posix()}:{i}: {line.strip()[:160]}")
    if not hits:
        return f"no match for {pattern!r}"
    return "\n".join(hits[:MAX_HITS]) + (f"\n... and {len(hits) - MAX_HITS} more" if len(hits) > MAX_HITS else "")


def _repeat_product(pattern: str) -> int:
    """The product of every counted repetition's bound (``{m}``, ``{m,n}``, ``{m,}``) in ``pattern``.
    ``regex`` expands counted repeats when it compiles, outside the time limit: ``(?:a{10000}){10000}``
    did not compile within a minute, ``(?:a{100}){100}`` takes 12 ms."""
    out = 1
    for low, high in _COUNTED.findall(pattern):
        out *= max(int(low or 0), int(high or 0), 1)
        if out > MAX_REPEAT:
            break
    return out


_COUNTED = re.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")


def do_edit(root: Path, call: Call) -> str:
    path = inside(root, arg(call, "path", str))
    search, replace = arg(call, "search", str), arg(call, "replace", str)
    for name, text in (("search", search), ("replace", replace)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError(f"edit: {name} is not valid Unicode text (a lone surrogate)") from None
    if path.exists() and not path.is_file():
        raise ToolError(f"edit: {call.args['path']!r} is not a file")
    if not search:  # an empty search creates a new file (never overwrites one)
        if path.exists():
            raise ToolError(f"edit: {call.args['path']} exists; an empty search only creates a new file")
        _write(path, replace, mkdir=True)
        return f"created {call.args['path']}"
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    n = text.count(search)
    if n != 1:
        raise ToolError(f"edit: the search text occurs {n} times in {call.args['path']}; it must occur exactly once "
                        "(copy it from a read, with enough lines to be unique)")
    _write(path, text.replace(search, replace, 1))
    return f"edited {call.args['path']}"


def _write(path: Path, text: str, mkdir: bool = False) -> None:
    data = text.encode("utf-8")
    if len(data) > MAX_FILE:
        raise ToolError(f"edit: the file would be {len(data)} bytes (at most {MAX_FILE})")
    try:
        if mkdir:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as e:  # a name too long, a folder that is a file, ...: the agent's mistake, answered
        raise ToolError(f"edit: {type(e).__name__}: {e.strerror or e}") from None


def run_tool(root: Path, call: Call) -> str:
    """One reading or editing tool's answer. Any error (also one no check above foresaw) becomes a
    ``ToolError``: whatever a reply holds, the episode goes on."""
    try:
        return READERS[call.tool](root, call)
    except ToolError:
        raise
    except Exception as e:  # noqa: BLE001 - model output must never raise out of the episode
        raise ToolError(f"{call.tool}: {type(e).__name__}: {str(e)[:200]}") from None


def replay_edits(root: Path, replies: list[str]) -> None:
    """Apply the edits of earlier replies in order (those that failed then fail again, silently)."""
    for reply in replies:
        try:
            call = parse_call(reply)
            if call.tool == "edit":
                run_tool(root, call)
        except ToolError:
            continue


READERS = {"list": do_list, "read": do_read, "search": do_search, "edit": do_edit}
