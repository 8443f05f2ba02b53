"""Jinja filters for hostile text: prompts, completions, traces and LM replies are shown, never run.

Autoescape turns markup into text; these filters also make invisible characters visible:
C0/C1 control characters (NUL included), lone surrogates and the Unicode bidi overrides
("trojan source") become ``\\xNN`` / ``\\uNNNN`` escapes, so what a reader sees is what is stored.
"""

from __future__ import annotations

import base64
import json
import math
import re
import shlex

from evolve.lineage.render import flat_metrics

_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\u200b-\u200f\u202a-\u202e\u2066-\u2069"
                        "\ufeff]")


def _escape_char(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(value) -> str:
    """``value`` as text with invisible and direction-changing characters spelled out."""
    return _INVISIBLE.sub(_escape_char, "" if value is None else str(value))


def form_value(value) -> str:
    """A filter value for a form field: as is, or ``b64:...`` when it holds invisible characters
    (an HTML parser would rewrite NUL, so the raw value could not round-trip)."""
    value = "" if value is None else str(value)
    if not _INVISIBLE.search(value):
        return value
    return "b64:" + base64.urlsafe_b64encode(value.encode("utf-8", "surrogatepass")).decode()


def from_form(value: str | None) -> str:
    if value and value.startswith("b64:"):
        try:
            return base64.urlsafe_b64decode(value[4:].encode()).decode("utf-8", "surrogatepass")
        except (ValueError, UnicodeDecodeError):
            return ""
    return value or ""


def pretty_json(obj) -> str:
    """Indented JSON (non-ASCII kept; control characters escaped by json itself)."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str, sort_keys=False)
    return visible(text)


def num(v, digits: int = 3) -> str:
    """A number for a table: ``digits`` significant digits, no exponent below 1e-4."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if v == 0:
            return "0"
        if (v == int(v) and abs(v) < 1e15) or abs(v) >= 1000:
            return f"{v:.0f}"
        return f"{v:.{max(digits, 1)}g}"
    return visible(v)


def short(h, n: int = 8) -> str:
    return visible(h[:n]) if h else "–"


def signed(v) -> str:
    if v is None:
        return ""
    return f"{v:+.3f}".rstrip("0").rstrip(".") if isinstance(v, float) else f"{v:+d}"


def flat(d) -> dict:
    return flat_metrics(d) if isinstance(d, dict) else {}


def shell(word) -> str:
    return shlex.quote(str(word))


FILTERS = {"visible": visible, "form_value": form_value, "pretty_json": pretty_json, "num": num, "short": short, "signed": signed,
           "flat": flat, "shell": shell}
