"""The repo-fix agent's tools, and how a reply becomes a tool call.

A reply holds one JSON object (bare or in a ```json fence): ``{"tool": NAME, ...arguments}``.
Every problem (no JSON, an unknown tool, a missing or mistyped argument, a path outside the copy,
an edit whose search text is not found exactly once) is an observation starting with ``error:``
that says what to do; nothing here raises on model output. Reading tools touch only the working
copy, from the parent process (no code runs); paths are resolved and must stay inside the copy.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

MAX_LINES = 120
MAX_LIST = 200
MAX_HITS = 40
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


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def parse_call(reply: str) -> Call:
    """The first JSON object with a ``tool`` key in ``reply``."""
    candidates = [m.group(1) for m in _FENCE.finditer(reply)]
    dec = json.JSONDecoder()
    for i, ch in enumerate(reply):
        if ch == "{" and len(candidates) < 50:
            try:
                obj, _ = dec.raw_decode(reply[i:])
                candidates.append(obj)
            except ValueError:
                continue
    for c in candidates:
        if isinstance(c, str):
            try:
                c = json.loads(c)
            except ValueError:
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
    p = (root / rel).resolve()
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
    try:
        rx = re.compile(pattern)
    except re.error:
        rx = re.compile(re.escape(pattern))
    base = inside(root, arg(call, "path", str, "."))
    hits = []
    files = [base] if base.is_file() else sorted(base.rglob("*.py"))
    for p in files:
        for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                hits.append(f"{p.relative_to(root).as_posix()}:{i}: {line.strip()[:160]}")
    if not hits:
        return f"no match for {pattern!r}"
    return "\n".join(hits[:MAX_HITS]) + (f"\n... and {len(hits) - MAX_HITS} more" if len(hits) > MAX_HITS else "")


def do_edit(root: Path, call: Call) -> str:
    path = inside(root, arg(call, "path", str))
    search, replace = arg(call, "search", str), arg(call, "replace", str)
    if path.exists() and not path.is_file():
        raise ToolError(f"edit: {call.args['path']!r} is not a file")
    if not search:  # an empty search creates a new file (never overwrites one)
        if path.exists():
            raise ToolError(f"edit: {call.args['path']} exists; an empty search only creates a new file")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(replace, encoding="utf-8")
        return f"created {call.args['path']}"
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    n = text.count(search)
    if n != 1:
        raise ToolError(f"edit: the search text occurs {n} times in {call.args['path']}; it must occur exactly once "
                        "(copy it from a read, with enough lines to be unique)")
    path.write_text(text.replace(search, replace, 1), encoding="utf-8")
    return f"edited {call.args['path']}"


def replay_edits(root: Path, replies: list[str]) -> None:
    """Apply the edits of earlier replies in order (those that failed then fail again, silently)."""
    for reply in replies:
        try:
            call = parse_call(reply)
            if call.tool == "edit":
                do_edit(root, call)
        except ToolError:
            continue


READERS = {"list": do_list, "read": do_read, "search": do_search, "edit": do_edit}
