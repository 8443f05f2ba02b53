"""EvalPlus's post-processing of a reply's code, for grading ``maker-greedy`` samples as the maker's harness does.

EvalPlus (``evalplus/sanitize.py``, read, not imported: EvalPlus is not installed here) keeps a script's
imports, and of its top-level classes, functions and assignments only those the entry point reaches; every
other top-level statement goes (the ``assert``/``print`` lines a model adds as its own tests, a
``__main__`` block). Without it, a reply to EvalPlus's "self-contained script" prompt fails on the model's
own wrong assert before HumanEval's tests run.

Departure: EvalPlus parses with tree-sitter and, when the code does not parse, keeps the longest block of
lines that does; here Python's ``ast`` parses and code that does not parse is returned unchanged (it fails
as a SyntaxError either way).
"""

from __future__ import annotations

import ast

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, _DEFS):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def sanitize(code: str, entry_point: str) -> str:
    """The code EvalPlus would run: imports, and the definitions ``entry_point`` reaches, in source order."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        for name in _defined(node):
            defs.setdefault(name, node)  # EvalPlus keeps a name's first definition
    if entry_point not in defs:
        return code
    reached, todo = set(), [entry_point]
    while todo:
        name = todo.pop()
        if name in reached or name not in defs:
            continue
        reached.add(name)
        todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)]
    kept = {id(defs[n]) for n in reached}
    body = [n for n in tree.body if n in imports or id(n) in kept]
    return "\n\n".join(ast.get_source_segment(code, n) or ast.unparse(n) for n in body) + "\n"
