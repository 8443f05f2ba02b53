"""Plain-value codec shared by the parent and the sandbox. Standard library only.

``encode`` turns a value made only of exact built-in types into tagged JSON, within a byte
budget (checked with ``type(x) is ...`` before any of the value's own methods can run; anything
else raises NonPlain, an over-budget value TooLarge, both before anything is sent):

  int -> JSON number (past 3000 bits: {"h": hex}), float -> JSON number / NaN / Infinity,
  str -> JSON string, bool/None -> true/false/null, list -> JSON array,
  tuple -> {"t": [...]}, dict -> {"d": [[k, v], ...]}, set -> {"s": [...]},
  frozenset -> {"f": [...]}, bytes -> {"b": hex}, complex -> {"c": [re, im]}.

A JSON object is always a tag and a JSON string always user data, so nothing a candidate returns
can be read back as a marker. ``decode`` (trusted side) is ``json.loads`` with a tag hook and a
length cap; any malformed text raises ValueError. This file is also concatenated into the
fork-server's source (see client.server_source), so it must not import from the package.
"""

import os  # noqa: F401 - shared by the concatenated server source
import sys  # noqa: F401
import time  # noqa: F401

_MAX_DEPTH = 64
_BIG_BITS = 3000  # ints above this travel in hex: decimal str() of large ints is capped and slow


class NonPlain(Exception):
    """A value that is not made of exact built-in types (or nests deeper than _MAX_DEPTH)."""


class TooLarge(Exception):
    """An encoded value over its byte budget."""


def _make_encoder():
    # Every builtin is bound now, before any candidate code can run: patching builtins or json
    # later cannot change how results are converted.
    import json.encoder

    _type, _repr, _len, _hex = type, repr, len, hex
    _name = type.__dict__["__name__"].__get__
    _str_enc = json.encoder.encode_basestring_ascii  # the C encoder; escapes lone surrogates
    _int, _bool, _float, _str, _none = int, bool, float, str, type(None)
    _list, _tuple, _dict, _set, _fset, _bytes, _complex = list, tuple, dict, set, frozenset, bytes, complex
    _append, _join, _bytes_hex = list.append, "".join, bytes.hex
    _inf = float("inf")

    def encode(x, limit=1 << 20):
        parts, size = [], [0]

        def put(s):
            size[0] += _len(s)
            if size[0] > limit:
                raise TooLarge(f"result over {limit} bytes")
            _append(parts, s)

        def seq(items, open_, close, depth):
            put(open_)
            first = True
            for e in items:
                if not first:
                    put(",")
                first = False
                enc(e, depth)
            put(close)

        def enc(x, depth):
            t = _type(x)
            if depth > _MAX_DEPTH:
                raise NonPlain(f"nesting deeper than {_MAX_DEPTH}")
            if t is _int:
                if x.bit_length() <= _BIG_BITS:
                    put(_repr(x))
                elif x.bit_length() > limit * 4:
                    raise TooLarge(f"result over {limit} bytes")
                else:
                    put('{"h":"' + _hex(x) + '"}')
            elif t is _str:
                if _len(x) > limit:
                    raise TooLarge(f"result over {limit} bytes")
                put(_str_enc(x))
            elif t is _bool:
                put("true" if x else "false")
            elif t is _none:
                put("null")
            elif t is _float:
                put("NaN" if x != x else "Infinity" if x == _inf else "-Infinity" if x == -_inf else _repr(x))
            elif t is _list or t is _tuple or t is _set or t is _fset or t is _dict:  # identity: `in` calls __eq__
                if _len(x) > limit:
                    raise TooLarge(f"result over {limit} bytes")
                d = depth + 1
                if t is _list:
                    seq(x, "[", "]", d)
                elif t is _tuple:
                    seq(x, '{"t":[', "]}", d)
                elif t is _set:
                    seq(x, '{"s":[', "]}", d)
                elif t is _fset:
                    seq(x, '{"f":[', "]}", d)
                else:
                    put('{"d":[')
                    first = True
                    for k, v in x.items():
                        put("[" if first else ",[")
                        first = False
                        enc(k, d)
                        put(",")
                        enc(v, d)
                        put("]")
                    put("]}")
            elif t is _bytes:
                if _len(x) * 2 > limit:
                    raise TooLarge(f"result over {limit} bytes")
                put('{"b":"' + _bytes_hex(x) + '"}')
            elif t is _complex:
                put('{"c":[')
                enc(x.real, depth)
                put(",")
                enc(x.imag, depth)
                put("]}")
            else:
                raise NonPlain(_name(t))

        enc(x, 0)
        return _join(parts)

    return encode


encode = _make_encoder()


_MAX_ITEMS = 200_000  # elements of one decoded set, frozenset or dict
_MAX_SAME_HASH = 8  # elements of one set / keys of one dict that may share a hash value


def _hash_guard(items):
    """Refuse a hashed container whose items would make building it quadratic: ints, tuples and
    floats hash deterministically, so a job can send thousands of distinct keys that all hash alike
    (about 9 s of CPU per sample here). Distinct hashes cannot collide for long (the probe sequence
    mixes in every bit), so capping items per hash value bounds the work."""
    if len(items) > _MAX_ITEMS:
        raise ValueError("hashed container too large")
    seen = {}
    for x in items:
        h = hash(x)  # TypeError for an unhashable item: caught by decode
        c = seen.get(h, 0) + 1
        if c > _MAX_SAME_HASH:
            raise ValueError("hash-colliding keys")
        seen[h] = c
    return items


def _tag(pairs):
    """json object_pairs_hook: every JSON object is exactly one tag (pairs, so no dict of a job's
    keys is ever built by json itself); anything else is malformed."""
    if len(pairs) != 1:
        raise ValueError("malformed tag")
    (k, v), = pairs
    if k == "t" and type(v) is list:
        return tuple(v)
    if k == "d" and type(v) is list:
        if not all(type(p) is list and len(p) == 2 for p in v):
            raise ValueError("malformed dict")
        _hash_guard([p[0] for p in v])
        return {p[0]: p[1] for p in v}
    if k == "s" and type(v) is list:
        return set(_hash_guard(v))
    if k == "f" and type(v) is list:
        return frozenset(_hash_guard(v))
    if k == "b" and type(v) is str:
        return bytes.fromhex(v)
    if k == "c" and type(v) is list and len(v) == 2 and all(type(e) is int or type(e) is float for e in v):
        return complex(v[0], v[1])
    if k == "h" and type(v) is str and v.startswith(("0x", "-0x")):
        return int(v, 16)
    raise ValueError("unknown tag")


def decode(text, limit=1 << 20):
    """Inverse of :func:`encode` on the trusted side; ValueError for anything malformed or too long."""
    import json

    if type(text) is not str or len(text) > limit:
        raise ValueError("result text missing or too long")
    try:
        return json.loads(text, object_pairs_hook=_tag)
    except (TypeError, RecursionError, MemoryError, OverflowError) as e:
        raise ValueError(f"malformed result ({type(e).__name__})") from None


def same_types(got, expected):
    """Exact types all the way down (2.0 is not 2, True is not 1, a tuple is not a list), on plain
    values; by identity, never ``in`` (which would call a metaclass's __eq__)."""
    t = type(got)
    if t is not type(expected):
        return False
    if t is list or t is tuple:
        return len(got) == len(expected) and all(same_types(a, b) for a, b in zip(got, expected, strict=True))
    if t is dict:
        return got.keys() == expected.keys() and all(same_types(v, expected[k]) for k, v in got.items())
    return True


def is_plain(value) -> bool:
    """True when ``value`` is made of exact built-in types (so marshal and encode both carry it)."""
    try:
        encode(value, 1 << 62)
    except (NonPlain, TooLarge):
        return False
    return True
