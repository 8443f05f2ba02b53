"""Markdown code fences, found in linear time (no backtracking regex over model text).

A fence opens with three backticks, an info string of spaces/tabs, an optional language word and
spaces/tabs, then a newline; the block runs to the next three backticks or the end of the text.
This is exactly what ``re.findall(r"```[ \\t]*(LANG)[ \\t]*\\n(.*?)(?:```|\\Z)", text, re.S)`` finds,
but that pattern backtracks quadratically (or worse) on long runs of spaces and backticks: a crafted
or degenerate reply stalled it for ~50 s. Here each regex is a single quantifier anchored at a
position, and every character of the text is scanned a bounded number of times.
"""

from __future__ import annotations

import re

_BLANK = re.compile(r"[ \t]*")
_CHAT_LANG = re.compile(r"[A-Za-z0-9_+-]*")  # any info word (the chat reply parser)
_PY_LANG = re.compile(r"(?:python3?|py)?", re.I)  # only python / py or nothing (plain completions)


def _blocks(text: str, lang_re: re.Pattern) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    n, i = len(text), text.find("```")
    while i != -1:
        p = i + 3
        if p < n and text[p] == "`":  # a longer run of backticks: the fence may start further on
            i = text.find("```", i + 1)
            continue
        p = _BLANK.match(text, p).end()
        lang = lang_re.match(text, p)
        p = _BLANK.match(text, lang.end()).end()
        if p >= n or text[p] != "\n":
            i = text.find("```", i + 1)
            continue
        end = text.find("```", p + 1)
        out.append((lang.group(0), text[p + 1: end if end != -1 else n]))
        if end == -1:
            break
        i = text.find("```", end + 3)
    return out


def chat_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block; any info word counts as the language."""
    return _blocks(text, _CHAT_LANG)


def python_blocks(text: str) -> list[str]:
    """Bodies of the blocks fenced as python, python3, py or with no language."""
    return [body for _, body in _blocks(text, _PY_LANG)]
