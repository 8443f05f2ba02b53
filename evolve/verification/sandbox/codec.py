"""Plain-value codec shared by the parent and the sandbox. Standard library only.

``encode`` turns a value made only of exact built-in types into a Python literal (anything else
raises NonPlain, checked with ``type(x) is ...`` before any of the value's own methods can run);
``decode`` reads it back with ``ast.literal_eval``. ``encode_args`` marshals test arguments for the
child. This file is also concatenated into the fork-server's source (see client.server_source),
so it must not import from the package.
"""

import os  # noqa: F401 - shared by the concatenated server source
import sys  # noqa: F401
import time  # noqa: F401

_NAN = "\x00nan"
_FROZEN = "\x00frozenset"
_BIGINT = "\x00int"  # ints past 10**1000 travel in hex: decimal str() of them is capped (4300 digits)
_BIG = 10**1000
_MAX_DEPTH = 64


class NonPlain(Exception):
    """A value that is not made of exact built-in types."""


def _make_encoder():
    # Every builtin is bound now, before any candidate code can run: patching builtins later
    # cannot change how results are converted.
    _type, _repr, _len = type, repr, len
    _name = type.__dict__["__name__"].__get__
    _scalars = (int, bool, str, bytes, type(None), complex)
    _float, _list, _tuple, _dict, _set, _fset, _int, _hex = float, list, tuple, dict, set, frozenset, int, hex
    _join = ",".join

    def enc(x, depth=0):
        t = _type(x)  # exact type first: subclasses never reach __iter__/__eq__/__repr__ overrides
        if depth > _MAX_DEPTH:
            raise NonPlain(f"nesting deeper than {_MAX_DEPTH}")
        if t is _int and (x > _BIG or x < -_BIG):
            return "(" + _repr(_BIGINT) + "," + _repr(_hex(x)) + ")"
        if t in _scalars:
            return _repr(x)
        if t is _float:
            if x != x:
                return _repr(_NAN)
            if x in (1e999, -1e999):
                return "1e999" if x > 0 else "-1e999"
            return _repr(x)
        d = depth + 1
        if t is _list:
            return "[" + _join([enc(e, d) for e in x]) + "]"
        if t is _tuple:
            return "(" + _join([enc(e, d) for e in x]) + ("," if _len(x) == 1 else "") + ")"
        if t is _dict:
            return "{" + _join([enc(k, d) + ":" + enc(v, d) for k, v in x.items()]) + "}"
        if t is _set:
            return "{" + _join([enc(e, d) for e in x]) + "}" if x else "set()"
        if t is _fset:
            return "(" + _repr(_FROZEN) + ",[" + _join([enc(e, d) for e in x]) + "])"
        raise NonPlain(_name(t))

    return enc


encode = _make_encoder()


def _fix(x):
    t = type(x)
    if t is str and x == _NAN:
        return float("nan")
    if t is list:
        return [_fix(e) for e in x]
    if t is tuple:
        if len(x) == 2 and x[0] == _FROZEN and type(x[1]) is list:
            return frozenset(_fix(e) for e in x[1])
        if len(x) == 2 and x[0] == _BIGINT and type(x[1]) is str:
            return int(x[1], 16)
        return tuple(_fix(e) for e in x)
    if t is dict:
        return {_fix(k): _fix(v) for k, v in x.items()}
    if t is set:
        return {_fix(e) for e in x}
    return x


def encode_args(args):
    """Arguments for the child: marshal (a C loader there, no ast, no parsing) as hex."""
    import marshal

    encode(args)  # plain values only: raises NonPlain otherwise
    return marshal.dumps(args).hex()


_SINGLETONS = {"True": True, "False": False, "None": None}


def decode(text):
    """Inverse of :func:`encode` (trusted side: ``ast.literal_eval``, never ``eval``)."""
    import ast

    if text in _SINGLETONS:  # fast paths for the commonest results
        return _SINGLETONS[text]
    digits = text[1:] if text[:1] == "-" else text
    if digits.isascii() and digits.isdigit() and len(digits) < 4000:
        return int(text)
    value = ast.literal_eval(text)
    return _fix(value) if "\\x00" in text else value


def _make_plain_copy():
    """A fresh structure of exact built-in types equal to the value, or NonPlain (weak path)."""
    _type, _name = type, type.__dict__["__name__"].__get__
    _scalars = (int, bool, str, bytes, type(None), complex, float)
    _list, _tuple, _dict, _set, _fset = list, tuple, dict, set, frozenset

    def cp(x, depth=0):
        t = _type(x)
        if depth > _MAX_DEPTH:
            raise NonPlain(f"nesting deeper than {_MAX_DEPTH}")
        if t in _scalars:
            return x
        d = depth + 1
        if t is _list:
            return [cp(e, d) for e in x]
        if t is _tuple:
            return _tuple([cp(e, d) for e in x])
        if t is _dict:
            return {cp(k, d): cp(v, d) for k, v in x.items()}
        if t is _set:
            return {cp(e, d) for e in x}
        if t is _fset:
            return _fset([cp(e, d) for e in x])
        raise NonPlain(_name(t))

    return cp
