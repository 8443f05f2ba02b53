"""No import cycles inside the evolve package (docs/architecture.md: one arrow between two modules).

The graph is built from source with ``ast``, not by importing: every ``import``/``from ... import`` in a
module counts, at module level, inside functions (lazy imports) and under ``if TYPE_CHECKING:``, because
each of those is an arrow a reader has to follow and a cycle through a lazy import is still a cycle.
Relative imports are resolved against the module's package; ``from pkg import name`` counts as an arrow to
``pkg.name`` when that is a module, else to ``pkg`` (a package's ``__init__``). Nothing is exempt:
an ``__init__`` that re-exports a submodule which imports the package back is a cycle too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "evolve"


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """``evolve.a.b`` -> its file, for every .py under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of the dotted ``name`` that is one of our modules."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _base(mod: str, is_pkg: bool, level: int, module: str | None) -> str:
    """The absolute name a relative ``from`` import resolves against."""
    pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if level > 1:
        pkg = pkg[: len(pkg) - (level - 1)]
    return ".".join(pkg + ([module] if module else []))


def imports_of(mod: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of ours that ``mod`` imports anywhere in its file."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(mod, is_pkg, node.level, node.module) if node.level else (node.module or "")
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for name in names:
            target = _target(name, modules)
            if target and target != mod:
                found.add(target)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = module_names(root)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return [_one_cycle(graph, comp) for comp in comps]


def _one_cycle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth first)."""
    members, start = set(comp), comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in prev:
                    prev[child] = node
                    nxt.append(child)
        frontier = nxt
    return comp


def test_finder_sees_lazy_type_only_and_relative_imports(tmp_path):
    """The finder itself: a cycle through a function-level, a TYPE_CHECKING and a relative import is found
    (and named as a path), and the same tree without its back arrow has none."""
    pkg = tmp_path / "evolve"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from evolve.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import X\n")
    (pkg / "c.py").write_text("import os\nimport evolve.a as a\n")
    cycles = find_cycles(import_graph(pkg))
    assert cycles == [["evolve.a", "evolve.sub.b", "evolve.c", "evolve.a"]], cycles
    (pkg / "c.py").write_text("import os\n")
    assert find_cycles(import_graph(pkg)) == []


def test_no_import_cycles_in_evolve():
    graph = import_graph()
    assert len(graph) > 50 and graph["evolve.lineage.store"], "the graph builder found no modules or imports"
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in evolve/ (each listed as a path back to its start):\n" + "\n".join(
        " -> ".join(c) for c in cycles)
