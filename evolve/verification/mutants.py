"""Automatic mutants of a gold solution, for the verifier self-check (the mutation score).

Operators (each mutant changes exactly one site, found by walking the AST in order):
  swap-arith   + <-> -, * -> //(ints) is not done; // <-> /
  swap-cmp     < <-> <=, > <-> >=, == <-> !=
  swap-bool    and <-> or
  off-by-one   integer constants n -> n+1 and n-1 (also range() bounds, which are constants or names)
  drop-branch  an `if` body replaced by `pass` (its else kept)
  early-return a function's first statement becomes `return None` (when it returns values)
A mutant that does not compile, or that prints the same source as the gold, is dropped.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

_SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.FloorDiv: ast.Div, ast.Div: ast.FloorDiv}
_SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq}
_SWAP_BOOL = {ast.And: ast.Or, ast.Or: ast.And}


@dataclass(frozen=True)
class Mutant:
    operator: str
    line: int
    source: str  # the whole mutated program


def _sites(tree: ast.AST) -> list[tuple[str, ast.AST, int]]:
    """(operator, node, variant) for every mutable site, in a stable order."""
    out: list[tuple[str, ast.AST, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
            out.append(("swap-arith", node, 0))
        elif isinstance(node, ast.AugAssign) and type(node.op) in _SWAP_BIN:
            out.append(("swap-arith", node, 0))
        elif isinstance(node, ast.Compare) and type(node.ops[0]) in _SWAP_CMP:
            out.append(("swap-cmp", node, 0))
        elif isinstance(node, ast.BoolOp):
            out.append(("swap-bool", node, 0))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            out.extend([("off-by-one", node, 1), ("off-by-one", node, -1)])
        elif isinstance(node, ast.If) and not (len(node.body) == 1 and isinstance(node.body[0], ast.Pass)):
            out.append(("drop-branch", node, 0))
        elif isinstance(node, ast.FunctionDef) and any(
                isinstance(n, ast.Return) and n.value is not None for n in ast.walk(node)):
            out.append(("early-return", node, 0))
    return out


def _apply(op: str, node: ast.AST, variant: int) -> None:
    if op == "swap-arith":
        node.op = _SWAP_BIN[type(node.op)]()
    elif op == "swap-cmp":
        node.ops[0] = _SWAP_CMP[type(node.ops[0])]()
    elif op == "swap-bool":
        node.op = _SWAP_BOOL[type(node.op)]()
    elif op == "off-by-one":
        node.value = node.value + variant
    elif op == "drop-branch":
        node.body = [ast.Pass()]
    elif op == "early-return":
        node.body = [*_docstring(node), ast.Return(ast.Constant(None)), *node.body[len(_docstring(node)):]]


def _docstring(fn: ast.FunctionDef) -> list[ast.stmt]:
    first = fn.body[0] if fn.body else None
    return [first] if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) else []


def mutants(program: str, limit: int = 30, only_lines: range | None = None) -> Iterator[Mutant]:
    """Up to ``limit`` distinct compiling mutants of ``program`` (sites spread evenly if there are more).

    ``only_lines``: restrict sites to these line numbers (the solution, not the prompt's docstring).
    """
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return
    gold = ast.unparse(tree)
    sites = [s for s in _sites(tree) if only_lines is None or getattr(s[1], "lineno", 0) in only_lines]
    if len(sites) > limit:  # spread evenly, deterministic
        step = len(sites) / limit
        sites = [sites[int(i * step)] for i in range(limit)]
    seen = {gold}
    for op, node, variant in sites:
        idx = _index(tree, node)
        copy_tree = copy.deepcopy(tree)
        _apply(op, _node_at(copy_tree, idx), variant)
        try:
            src = ast.unparse(ast.fix_missing_locations(copy_tree))
            compile(src, "<mutant>", "exec")
        except (SyntaxError, ValueError, RecursionError):
            continue
        if src in seen:
            continue
        seen.add(src)
        yield Mutant(op, getattr(node, "lineno", 0), src)


def _index(tree: ast.AST, target: ast.AST) -> int:
    for i, n in enumerate(ast.walk(tree)):
        if n is target:
            return i
    raise ValueError("node not in tree")


def _node_at(tree: ast.AST, idx: int) -> ast.AST:
    for i, n in enumerate(ast.walk(tree)):
        if i == idx:
            return n
    raise ValueError("index out of range")
