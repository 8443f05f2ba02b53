"""Taking a chat model's reply apart: the code to run, or a named failure class with a readable trace.

A chat model answers in markdown. What is extracted, and what is a failure (never repaired):
- the code is the first fenced block that defines the entry point, else the first block that
  defines any function, else the first block; text outside the fences is ignored (a chat model's
  "Here is the function:" is not scored);
- no fence: the whole reply is the code, so prose written into it is a failure;
- ``NoCode``: nothing that looks like code (no ``def`` anywhere, no fenced block);
- ``ProseInCode``: the code does not parse and its first offending line reads like an English
  sentence (prose mixed into the code, or prose instead of the answer);
- ``WrongEntryPoint``: the code parses but does not define the function the task asks for
  (for example ``def sum_even_numbers`` where ``f`` was asked); the trace names both;
- ``PrintsInsteadOfReturn``: the entry point never returns a value but calls ``print``.

Everything else (a SyntaxError that is not prose, a missing import, a wrong answer) is left to
the verifier, which reports it as it does for any program. The extraction is deterministic and
pure (no sandbox needed: the code is parsed, never run).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from evolve.verification.fences import chat_blocks

REPLY_CLASSES = ("NoCode", "ProseInCode", "WrongEntryPoint", "PrintsInsteadOfReturn")
_WORD = re.compile(r"[A-Za-z']+")
_ANY_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(", re.M)
_PARSE_ERRORS = (SyntaxError, ValueError, UnicodeError, RecursionError, MemoryError, OverflowError)


@dataclass(frozen=True)
class Extraction:
    code: str  # the code to verify ("" when nothing was found)
    fenced: bool  # the code came from a fenced block
    error_class: str | None = None  # one of REPLY_CLASSES, or None when the code goes to the verifier
    trace: str = ""  # readable, for humans and the reflector


def fenced_blocks(text: str) -> list[str]:
    return [body for _lang, body in chat_blocks(text)]


def _defined_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _pick_block(blocks: list[str], entry_point: str) -> str:
    # [ \t], never \s: with re.M a `^\s*` rescans every following blank line from each line start.
    pattern = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}[ \t]*\(", re.M)
    for b in blocks:
        if pattern.search(b):
            return b
    for b in blocks:
        if _ANY_DEF.search(b):
            return b
    return blocks[0]


def looks_like_prose(line: str) -> bool:
    """A line of English rather than code: several plain words, no code punctuation at its start."""
    s = line.strip()
    if not s or s.startswith(("#", "def ", "return ", "import ", "from ", "if ", "for ", "while ", "@")):
        return False
    words = _WORD.findall(s)
    if len(words) < 4:
        return False
    code_chars = sum(s.count(c) for c in "=()[]{}:")
    return code_chars <= 2 and sum(len(w) for w in words) >= 0.6 * len(s.replace(" ", ""))


def _returns_value(fn: ast.AST) -> bool:
    inner = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, inner):
            continue  # a nested function's return is not the entry point's
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def _prints(fn: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
               for n in ast.walk(fn))


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return f"{fn.name}({', '.join(a.arg for a in fn.args.args)})"


def extract(text: str, entry_point: str) -> Extraction:
    """The code of a chat reply, or the reply failure class (see the module docstring)."""
    blocks = fenced_blocks(text)
    fenced = bool(blocks)
    code = _pick_block(blocks, entry_point) if blocks else text
    if not code.strip() or (not fenced and "def " not in code):
        return Extraction(code, fenced, "NoCode", "the reply contains no code: no fenced block and no `def`")
    try:
        tree = ast.parse(code)
    except _PARSE_ERRORS as e:
        if not isinstance(e, SyntaxError):  # a surrogate, a NUL, a parser out of stack or memory
            return Extraction(code, fenced)  # the verifier reports it (the job's compile fails)
        lines = code.splitlines()
        bad = lines[e.lineno - 1] if e.lineno and 0 < e.lineno <= len(lines) else ""
        if looks_like_prose(bad):
            where = "inside the code block" if fenced else "mixed into the code (no fenced block)"
            return Extraction(code, fenced, "ProseInCode", f"prose {where}, line {e.lineno}: {bad.strip()[:120]!r}")
        return Extraction(code, fenced)  # an ordinary SyntaxError: the verifier reports it
    functions = _defined_functions(tree)
    target = next((f for f in functions if f.name == entry_point), None)
    if target is None:
        if functions:
            names = ", ".join(_signature(f) for f in functions[:3])
            msg = f"the task asks for a function named `{entry_point}`, the reply defines {names}"
        else:
            msg = f"the task asks for a function named `{entry_point}`, the reply defines no function"
        return Extraction(code, fenced, "WrongEntryPoint", msg)
    if not _returns_value(target) and _prints(target):
        return Extraction(code, fenced, "PrintsInsteadOfReturn",
                          f"`{entry_point}` prints its result and returns None; it must return the value")
    return Extraction(code, fenced)


def reply_failure(task_id: str, ext: Extraction):
    """The verdict on a reply that failed extraction: reward 0, one "reply" stage with the trace."""
    from evolve.verification.types import StageResult, TestFailure, VerifyResult

    failure = TestFailure(stage="reply", error_type=ext.error_class or "", message=ext.trace)
    stage = StageResult(name="reply", score=0.0, passed=False, trace=ext.trace, error_class=ext.error_class,
                        failures=[failure])
    return VerifyResult(task_id=task_id, reward=0.0, passed=False, stages=[stage], trace=ext.trace,
                        error_class=ext.error_class)
