"""Model text as emitted: stored losslessly on every database, shown escaped on a terminal.

A byte-level model can emit any code point: NUL, other control characters, and (from a decoder
that keeps undecodable bytes as surrogate escapes) lone surrogates. PostgreSQL refuses NUL in
text and no UTF-8 encoder takes a lone surrogate, so text columns store a reversible escape:

    U+E000 (a private-use character, the escape itself)  ->  U+E000 'e'
    NUL                                                   ->  U+E000 '0'
    a lone surrogate U+D800..U+DFFF                       ->  U+E000 's' + 4 hex digits

Text without any of these is stored unchanged, so the stored form is readable and old rows stay
valid (an old row holding U+E000 itself would be read differently; nothing the project wrote did).
JSON columns need no escape: the JSON encoder writes ``\\u0000`` and ``\\udXXX`` escapes, which
PostgreSQL's ``json`` type and SQLite both keep as text.
"""

from __future__ import annotations

import re

ESC = "\ue000"
_NEEDS = re.compile("[\ue000\x00\ud800-\udfff]")
_ESCAPED = re.compile("\ue000(e|0|s[0-9a-f]{4})")


def _escape_one(m: re.Match) -> str:
    c = m.group(0)
    if c == ESC:
        return ESC + "e"
    if c == "\x00":
        return ESC + "0"
    return f"{ESC}s{ord(c):04x}"


def _unescape_one(m: re.Match) -> str:
    code = m.group(1)
    if code == "e":
        return ESC
    if code == "0":
        return "\x00"
    return chr(int(code[1:], 16))


def to_db(text: str | None) -> str | None:
    """The storable form of ``text`` (identical when it holds nothing special)."""
    if text is None or not _NEEDS.search(text):
        return text
    return _NEEDS.sub(_escape_one, text)


def from_db(stored: str | None) -> str | None:
    """Inverse of :func:`to_db`."""
    if stored is None or ESC not in stored:
        return stored
    return _ESCAPED.sub(_unescape_one, stored)


def terminal_safe(text: str) -> str:
    """``text`` for a terminal or a page: newlines and tabs kept, every other character Python does
    not call printable (controls, lone surrogates, separators, private use) shown as an escape
    (``\\x00``, ``\\x1b``, ``\\udc80``)."""
    if text.isprintable():
        return text
    return "".join(c if c in "\n\t" or c.isprintable() else
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                    else f"\\U{ord(c):08x}") for c in text)


def one_line(text: object, limit: int = 0) -> str:
    """``text`` as exactly one printable line: newlines, carriage returns and tabs shown as ``\\n``,
    ``\\r``, ``\\t`` and every other non-printable character (lone surrogates too) as an escape, so
    model text can neither forge a line of its own (``999 passed, 0 failed``) nor make a UTF-8
    terminal raise. ``limit`` > 0 clips the result (after escaping) to that many characters."""
    s = text if type(text) is str else str(text)
    if limit and len(s) > limit * 8:  # never escape more than could be shown
        s = s[: limit * 8]
    if not s.isprintable():
        s = "".join(c if c.isprintable() else
                    {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or
                    (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                     else f"\\U{ord(c):08x}") for c in s)
    return s if not limit or len(s) <= limit else s[: max(0, limit - 3)] + "..."
