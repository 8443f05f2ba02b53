"""Bug injection into a package's source: one AST site inside one function body, spliced back into
the file as text so the rest of the file (comments, formatting) stays byte-identical.

Operators: those of ``evolve.verification.mutants`` (swap-arith, swap-cmp, swap-bool, off-by-one,
drop-branch: an ``if`` body replaced by ``pass``), plus ``swap-args`` (the first two positional
arguments of a call exchanged). ``early-return`` is not used here: it rewrites a whole function.
"""

from __future__ import annotations

import ast
import copy
import difflib
from dataclasses import dataclass

from evolve.verification.mutants import _apply, _sites

OPERATORS = ("swap-arith", "swap-cmp", "swap-bool", "off-by-one", "drop-branch", "swap-args")


@dataclass(frozen=True)
class Injection:
    """One injected bug: where, which operator, and the buggy file."""

    file: str
    function: str  # qualified: Class.method or func
    operator: str
    line: int
    source: str  # the whole buggy file

    def diff(self, pristine: str) -> str:
        return "".join(difflib.unified_diff(pristine.splitlines(True), self.source.splitlines(True),
                                            f"a/{self.file}", f"b/{self.file}"))


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef]]:
    out: list[tuple[str, ast.FunctionDef]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((prefix + child.name, child))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    walk(tree, "")
    return out


def _swap_sites(fn: ast.AST) -> list[tuple[str, ast.AST, int]]:
    return [("swap-args", n, 0) for n in ast.walk(fn) if isinstance(n, ast.Call) and len(n.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in n.args[:2])
            and ast.dump(n.args[0]) != ast.dump(n.args[1])]


def _body_sites(fn: ast.FunctionDef) -> list[tuple[str, ast.AST, int]]:
    doc = fn.body[0] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(
        getattr(fn.body[0], "value", None), ast.Constant) else None
    inner = {id(n) for stmt in fn.body if stmt is not doc for n in ast.walk(stmt)}
    nested = {id(n) for sub in ast.walk(fn) if sub is not fn and isinstance(sub, ast.FunctionDef | ast.ClassDef)
              for n in ast.walk(sub)}  # a nested function is its own candidate
    sites = [s for s in _sites(fn) + _swap_sites(fn)
             if id(s[1]) in inner and id(s[1]) not in nested and s[0] != "early-return"]
    return sites


def _splice(source: str, node: ast.AST, text: str) -> str:
    lines = source.splitlines(keepends=True)
    first, last = node.lineno - 1, node.end_lineno - 1
    head = lines[first].encode()[:node.col_offset].decode()
    tail = lines[last].encode()[node.end_col_offset:].decode()
    indent = " " * len(head.expandtabs()) if isinstance(node, ast.stmt) else ""
    body = text.replace("\n", "\n" + indent)
    return "".join(lines[:first]) + head + body + tail + "".join(lines[last + 1:])


def _drop_body(source: str, node: ast.If) -> str:
    """The ``if`` body's lines replaced by one ``pass`` (its test and ``else`` untouched)."""
    lines = source.splitlines(keepends=True)
    first, last = node.body[0].lineno - 1, node.body[-1].end_lineno - 1
    indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
    return "".join(lines[:first]) + indent + "pass\n" + "".join(lines[last + 1:])


def _mutate(op: str, node: ast.AST, variant: int) -> ast.AST:
    new = copy.deepcopy(node)
    if op == "swap-args":
        new.args[0], new.args[1] = new.args[1], new.args[0]
    else:
        _apply(op, new, variant)
    return new


def injections(path: str, source: str) -> list[Injection]:
    """Every compiling single-site bug of ``source`` (file ``path``), in a stable order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out, seen = [], {source}
    for qual, fn in _functions(tree):
        for op, node, variant in _body_sites(fn):
            if getattr(node, "end_lineno", None) is None or (op != "drop-branch" and node.end_lineno != node.lineno):
                continue  # one-line sites only: the diff stays one line, a search-and-replace can undo it
            try:
                if op == "drop-branch":
                    buggy = _drop_body(source, node)
                else:
                    buggy = _splice(source, node, ast.unparse(ast.fix_missing_locations(_mutate(op, node, variant))))
                compile(buggy, path, "exec")
            except (SyntaxError, ValueError, RecursionError, UnicodeDecodeError):
                continue
            if buggy in seen:
                continue
            seen.add(buggy)
            out.append(Injection(path, qual, op, node.lineno, buggy))
    return out
