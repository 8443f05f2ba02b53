"""New test inputs for a task, made by type-aware mutation of its own (EvalPlus's second step).

The seeds are the argument tuples of the task's own tests (``Verifier.plan(task).calls``: the calls
parsed out of a HumanEval ``check`` by ``rewrite.py``, or recorded from it). Each new input is a seed
or an earlier new input with one argument changed by its type:

  int      +-1, +-a small step, x2, //2, 0, or a value seen in the seeds (signs kept: a task whose
           seeds are all non-negative ints at a position never gets a negative one there)
  float    +-1, x2, /2, 0.0, a value seen; signs kept likewise
  bool     flipped
  str      a number written in it changed as an int (width kept), a character removed, inserted,
           replaced or doubled, a slice repeated, a string seen;
           new characters come from the seeds' own strings (a task of lowercase words gets
           lowercase letters), else ASCII letters
  list     an element removed, duplicated, mutated, inserted (a mutated copy), two swapped, emptied
  tuple    one element mutated (tuples are usually fixed-shape records)
  dict     a value mutated, a key removed, a copied entry under a mutated key
  other    kept as is (None, sets, bytes)

Keeping the seeds' types, signs and alphabets is a cheap, inferred precondition: HumanEval states
most of its preconditions that way ("positive integer", "lowercase letters"). Inputs the reference
solution rejects by raising are dropped by the callers, not here. Deterministic for a given seed;
sizes are bounded (MAX_ELEMS, MAX_STR, MAX_INT) so that no input makes the reference run for long.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from evolve.verification.sandbox.codec import encode, is_plain

MAX_ELEMS = 40  # list/dict length a mutation may grow to
MAX_STR = 200  # string length a mutation may grow to
MAX_INT = 10**6  # |int| a mutation may reach (x2 stops there)
MAX_BYTES = 4096  # encoded size of one generated argument tuple
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DIGITS = re.compile(r"\d+")


class _Pool:
    """What the seeds hold, by argument position: signs, string alphabets and values to splice in."""

    def __init__(self, seeds: list[tuple]):
        self.ints: list[int] = []
        self.floats: list[float] = []
        self.strs: list[str] = []
        self.numerals: list[int] = []  # numbers written in the seeds' strings ("04-12-2003": 4, 12, 2003)
        chars: set[str] = set()
        self.nonneg: dict[int, bool] = {}
        self.elems: dict[int, list] = {}  # elements of the lists seen at each argument position
        self.pos = 0  # the argument position being mutated (set by mutate_inputs)
        for s in seeds:
            for pos, arg in enumerate(s):
                self._walk(arg, chars)
                if type(arg) is list:
                    self.elems.setdefault(pos, []).extend(arg[:MAX_ELEMS])
                if self._has_negative(arg):
                    self.nonneg[pos] = False
                else:
                    self.nonneg.setdefault(pos, True)
        self.alphabet = "".join(sorted(chars)) or _LETTERS

    def _walk(self, v, chars: set[str], depth: int = 0) -> None:
        if depth > 8:
            return
        if type(v) is int:
            self.ints.append(v)
        elif type(v) is float:
            self.floats.append(v)
        elif type(v) is str:
            self.strs.append(v)
            chars.update(v[:MAX_STR])
            self.numerals += [int(d[:9]) for d in _DIGITS.findall(v[:MAX_STR])]
        elif type(v) in (list, tuple, set, frozenset):
            for e in list(v)[:MAX_ELEMS]:
                self._walk(e, chars, depth + 1)
        elif type(v) is dict:
            for k, e in list(v.items())[:MAX_ELEMS]:
                self._walk(k, chars, depth + 1)
                self._walk(e, chars, depth + 1)

    def _has_negative(self, v, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if type(v) in (int, float):
            return v < 0
        if type(v) in (list, tuple, set, frozenset):
            return any(self._has_negative(e, depth + 1) for e in list(v)[:MAX_ELEMS])
        if type(v) is dict:
            return any(self._has_negative(e, depth + 1) for e in list(v.values())[:MAX_ELEMS])
        return False


def _int(v: int, rng: random.Random, pool: _Pool, nonneg: bool) -> int:
    step = rng.choice((1, 1, 2, 3, 5, 10))
    ops: list[Callable[[], int]] = [lambda: v + 1, lambda: v - 1, lambda: v + step, lambda: v - step,
                                    lambda: v * 2, lambda: v // 2, lambda: 0]
    if pool.ints:
        ops.append(lambda: rng.choice(pool.ints))
    if not nonneg:
        ops.append(lambda: -v)
    out = rng.choice(ops)()
    out = max(-MAX_INT, min(MAX_INT, out))
    return abs(out) if nonneg else out


def _float(v: float, rng: random.Random, pool: _Pool, nonneg: bool) -> float:
    ops: list[Callable[[], float]] = [lambda: v + 1.0, lambda: v - 1.0, lambda: v * 2.0, lambda: v / 2.0,
                                      lambda: 0.0, lambda: round(v + rng.uniform(-3, 3), 2)]
    if pool.floats:
        ops.append(lambda: rng.choice(pool.floats))
    if not nonneg:
        ops.append(lambda: -v)
    out = rng.choice(ops)()
    if out != out or abs(out) > MAX_INT:
        return v
    return abs(out) if nonneg else out


def _number_in(v: str, rng: random.Random, pool: _Pool) -> str | None:
    """``v`` with one of its digit runs changed as an int, its width kept ("03-11" -> "04-11"), or None."""
    runs = list(_DIGITS.finditer(v))
    if not runs:
        return None
    m = rng.choice(runs)
    n = rng.choice(pool.numerals) if pool.numerals and rng.random() < 0.3 else _int(int(m.group()[:9]), rng, pool, True)
    return v[:m.start()] + str(n).zfill(len(m.group())) + v[m.end():]


def _str(v: str, rng: random.Random, pool: _Pool) -> str:
    c = rng.choice(pool.alphabet)
    if not v:
        return c if rng.random() < 0.7 or not pool.strs else rng.choice(pool.strs)
    if rng.random() < 0.5:  # a number written in a string ("03-11-2000", "1/5", "14.5") changes as a number
        out = _number_in(v, rng, pool)
        if out is not None:
            return out[:MAX_STR]
    i = rng.randrange(len(v))
    j = rng.randrange(i, len(v)) + 1
    ops: list[Callable[[], str]] = [lambda: v[:i] + v[i + 1:], lambda: v[:i] + c + v[i:], lambda: v[:i] + c + v[i + 1:],
                                    lambda: v[:i] + v[i] + v[i:], lambda: v[:j] + v[i:j] + v[j:], lambda: v[i:j]]
    if pool.strs:
        ops.append(lambda: rng.choice(pool.strs))
    return rng.choice(ops)()[:MAX_STR]


def _seq(v: list, rng: random.Random, pool: _Pool, nonneg: bool, depth: int) -> list:
    out = list(v)
    if not out:  # an element like those of this position's other lists (none seen: it stays empty)
        seen = pool.elems.get(pool.pos) if depth == 0 else None
        return [rng.choice(seen)] if seen else out
    i, j = rng.randrange(len(out)), rng.randrange(len(out))
    op = rng.randrange(6)
    if op == 0:
        del out[i]
    elif op == 1 and len(out) < MAX_ELEMS:
        out.insert(j, out[i])
    elif op == 2 and len(out) < MAX_ELEMS:
        out.insert(j, mutate_value(out[i], rng, pool, nonneg, depth + 1))
    elif op == 3:
        out[i], out[j] = out[j], out[i]
    elif op == 4 and rng.random() < 0.2:
        out = []
    else:
        out[i] = mutate_value(out[i], rng, pool, nonneg, depth + 1)
    return out


def _dict(v: dict, rng: random.Random, pool: _Pool, nonneg: bool, depth: int) -> dict:
    out = dict(v)
    if not out:
        return out
    k = rng.choice(list(out))
    op = rng.randrange(3)
    if op == 0:
        out[k] = mutate_value(out[k], rng, pool, nonneg, depth + 1)
    elif op == 1:
        del out[k]
    elif len(out) < MAX_ELEMS:
        nk = mutate_value(k, rng, pool, nonneg, depth + 1)
        if is_plain(nk) and type(nk) in (int, str, float, bool, tuple):
            out[nk] = out[k]
    return out


def mutate_value(v, rng: random.Random, pool: _Pool, nonneg: bool = False, depth: int = 0):
    """One type-aware change to ``v`` (a new value; ``v`` is not modified)."""
    if depth > 6:
        return v
    t = type(v)
    if t is bool:
        return not v
    if t is int:
        return _int(v, rng, pool, nonneg)
    if t is float:
        return _float(v, rng, pool, nonneg)
    if t is str:
        return _str(v, rng, pool)
    if t is list:
        return _seq(v, rng, pool, nonneg, depth)
    if t is tuple and v:
        i = rng.randrange(len(v))
        return (*v[:i], mutate_value(v[i], rng, pool, nonneg, depth + 1), *v[i + 1:])
    if t is dict:
        return _dict(v, rng, pool, nonneg, depth)
    return v


def _key(args: tuple) -> str | None:
    """A canonical text of a plain argument tuple (None when not plain or too large)."""
    try:
        return encode(args, MAX_BYTES)
    except Exception:  # noqa: BLE001 - TooLarge, NonPlain, a value too deep
        return None


def mutate_inputs(seeds: list[tuple], n: int, rng: random.Random) -> list[tuple]:
    """Up to ``n`` new argument tuples, none equal to a seed or to each other, in generation order.

    Each is a seed or an earlier new input with one argument mutated; argument counts never change."""
    seeds = [s for s in seeds if type(s) is tuple and _key(s) is not None]
    if not seeds or n <= 0 or not any(seeds):
        return []
    pool = _Pool(seeds)
    seen = {_key(s) for s in seeds}
    parents, out = list(seeds), []
    for _ in range(n * 30):
        if len(out) >= n:
            break
        base = rng.choice(seeds if rng.random() < 0.5 else parents)  # half from a seed: shapes stay close to the task's
        if not base:
            continue
        pos = pool.pos = rng.randrange(len(base))
        arg = mutate_value(base[pos], rng, pool, pool.nonneg.get(pos, False))
        child = (*base[:pos], arg, *base[pos + 1:])
        key = _key(child)
        if key is None or key in seen:
            continue
        seen.add(key)
        out.append(child)
        parents.append(child)
    return out


def task_rng(seed: int, task_id: str) -> random.Random:
    """The generator of one task's inputs: the same for a (seed, task) in any process or order."""
    return random.Random(f"evolve-inputgen:{seed}:{task_id}")
