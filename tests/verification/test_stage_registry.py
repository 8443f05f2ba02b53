"""Stages register themselves (issue #21, item 4): a new stage is one new file; no import cycle is
left in evolve.verification."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evolve.errors import ConfigError
from evolve.verification.pipeline import pipeline_from_dict
from evolve.verification.stages import STAGES, make_stage, register

PKG = Path(__file__).resolve().parents[2] / "evolve" / "verification"


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> set[str]:
    """evolve.verification modules imported anywhere in the file (functions too: a deferred import
    is still a cycle), except under ``if TYPE_CHECKING``."""
    tree, out = ast.parse(path.read_text()), set()
    skip = {id(n) for t in ast.walk(tree) if isinstance(t, ast.If) and "TYPE_CHECKING" in ast.unparse(t.test)
            for n in ast.walk(t)}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evolve.verification"):
            for a in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{node.module}.{a.name}"
                out.add(sub if (PKG.parents[1] / (sub.replace(".", "/") + ".py")).exists() else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("evolve.verification")}
    return out


def test_every_stage_registers_itself_and_base_imports_none():
    assert sorted(STAGES) == ["compile", "hidden", "lint", "perf", "visible"]
    assert {name: make_stage(name).name for name in STAGES} == {n: n for n in STAGES}
    assert not {m for m in _runtime_imports(PKG / "stages" / "base.py") if m.startswith("evolve.verification.stages")}
    with pytest.raises(ValueError, match="twice"):
        register("lint", lambda: None)


def test_a_new_stage_is_one_registration_and_the_pipeline_accepts_it():
    class Always:
        name = "always"

        def applies(self, ctx):
            return True

        def run(self, ctx, cfg):
            raise AssertionError("not run here")

    bad = {"stages": [{"name": "always"}]}
    with pytest.raises(ConfigError, match="must be one of"):
        pipeline_from_dict(bad)
    register("always", Always)
    try:
        assert pipeline_from_dict(bad).stages[0].name == "always"
    finally:
        del STAGES["always"]


def test_no_import_cycle_in_evolve_verification():
    graph = {_module(p): _runtime_imports(p) for p in PKG.rglob("*.py")}
    seen: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        seen[m] = 1
        for n in graph.get(m, ()):
            if seen.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(n):], n]))
            if n not in seen:
                visit(n, [*stack, n])
        seen[m] = 2

    for m in graph:
        if m not in seen:
            visit(m, [m])
    assert len(graph) > 20
