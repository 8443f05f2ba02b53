"""The reference solution against its own docstring's examples (issue 39, item 3).

HumanEval prompts show examples in several styles: doctest (``>>> f(x)`` then the value on the next
line, or ``>>> f(x) == v``), and ``f(x) == v``, ``f(x) = v``, ``f(x) => v``, ``f(x) ==> v``,
``f(x) -> v``, ``f(x) ➞ v``. Each example whose call and value are literals (``ast.literal_eval``)
is parsed; the rest are skipped and counted. The reference runs on the examples' arguments in the
sandbox, and a disagreement (or a raise) is reported: either the reference or the docstring is wrong,
and a test made from such an input would encode one of them. Nothing here becomes a test.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from evolve.verification.differential import oracle_for, run_outputs
from evolve.verification.sandbox_output import loaded
from evolve.verification.stages.base import call_repr, short
from evolve.verification.stages.tests import judge
from evolve.verification.types import Task, TestCase
from evolve.verification.verifier import Verifier

_SEPARATORS = re.compile(r"\s*(?:==>|=>|->|➞|==|=(?!=))\s*")


@dataclass
class Finding:
    task_id: str
    call: str  # f(args), as the docstring writes it
    docstring: str  # the value the docstring states
    reference: str  # what the reference returned, or "raised E: message"


def _literal_call(text: str, entry: str) -> tuple | None:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry
            and not node.keywords):
        return None
    try:
        return tuple(ast.literal_eval(a) for a in node.args)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _literal(text: str):
    try:
        return True, ast.literal_eval(text.strip().rstrip(".,;"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def examples(task: Task) -> tuple[list[tuple[tuple, object]], int]:
    """(args, stated value) of each parseable example in the prompt, and how many lines looked like an
    example (named the entry point in a call) but could not be parsed."""
    lines = task.prompt.splitlines()
    out, skipped, entry = [], 0, task.entry_point
    for i, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("def ") or f"{entry}(" not in line:
            continue
        line = line.removeprefix(">>>").strip()
        m = _split(line, entry)
        if m is None and raw.strip().startswith(">>>") and i + 1 < len(lines):
            m = (line, lines[i + 1])  # doctest: the value on the next line
        args = _literal_call(m[0], entry) if m else None
        ok, value = _literal(m[1]) if m else (False, None)
        if args is None or not ok:
            skipped += 1
            continue
        out.append((args, value))
    return out, skipped


def _split(line: str, entry: str) -> tuple[str, str] | None:
    """The call and the value of ``f(x) <sep> v``, at the separator after the call's closing parenthesis."""
    start = line.find(f"{entry}(")
    depth, end = 0, -1
    for k in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[k], 0)
        if depth == 0 and line[k] == ")":
            end = k + 1
            break
    if end < 0:
        return None
    m = _SEPARATORS.match(line, end)
    return (line[start:end], line[m.end():]) if m else None


def reference_findings(verifier: Verifier, tasks: list[Task]) -> tuple[list[Finding], dict]:
    """Run each task's reference on its docstring's examples; the disagreements, and counts."""
    items, stated = [], []
    for t in tasks:
        ex, _ = examples(t)
        if t.canonical_solution is not None and ex:
            items.append((t, t.canonical_solution, [a for a, _ in ex]))
            stated.append([v for _, v in ex])
    strict, findings = verifier.pipeline.strict_types, []
    for (t, _, calls), values, outs in zip(items, stated, run_outputs(verifier, items), strict=True):
        oracle = oracle_for(verifier, t)
        for args, want, o in zip(calls, values, outs, strict=True):
            got = loaded(o)
            if got.status == "ok":
                kind = "eq" if ":" in oracle.compare else oracle.compare  # the docstring states the value itself
                kind = "isclose" if kind == "eq" and type(want) is float else kind
                if judge(TestCase(args, want, kind, oracle.tol), got.value, strict) is None:
                    continue
                said = short(got.value)
            else:
                said = f"raised {got.error[0]}: {got.error[1]}" if got.status == "err" else f"no result ({got.status})"
            findings.append(Finding(t.task_id, call_repr(t.entry_point, args), short(want), said[:200]))
    counts = {"tasks_with_examples": len(items), "examples": sum(len(c) for _, _, c in items),
              "unparsed_example_lines": sum(examples(t)[1] for t in tasks), "findings": len(findings)}
    return findings, counts
