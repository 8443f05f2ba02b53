"""editcheck.check_edit, the rule an edit passes before any test run sees it (no sandbox needed here).

Each refusal is one way package code reached the verdict (issue 40) or a variant of it; each
admission is a fix the rule must not cost (the injected bugs themselves, fixes that differ from the
pristine code but use only the function's own names and plain builtins).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.repo.editcheck import check_edit
from evolve.repo.inject import injections

DATA = Path(__file__).parent / "data" / "minicalc-0.1" / "minicalc" / "__init__.py"

PRISTINE = '''"""pkg."""
import sys

LIMIT = 3


def clamp(x, lo, hi):
    """x limited to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def loaded(name):
    return name in sys.modules


class Box:
    size = 2

    def grow(self, n):
        return self.size * n
'''
PATCH = "_py' + 'test.reports'].TestReport.outcome = property(lambda s: 'passed', lambda s, v: None)"


def _edit(old: str, new: str, src: str = PRISTINE) -> str:
    assert src.count(old) == 1, old
    return src.replace(old, new)


def _check(edited: str | bytes):
    data = edited if isinstance(edited, bytes) else edited.encode()
    return check_edit("pkg/__init__.py", PRISTINE.encode(), data)


ADMITTED = {
    "unchanged": PRISTINE,
    "other-correct-fix": _edit("    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x",
                               "    return min(max(x, lo), hi)"),
    "fresh-locals-and-builtins": _edit("    return x\n", "    out = sorted([lo, x, hi])\n    return out[1] if x > lo else lo\n"),
    "comments-and-docstring": _edit('    """x limited to [lo, hi]."""', '    """Clamped."""  # note'),
    "reach-function-as-it-was": _edit("return name in sys.modules", "return name in sys.modules  # same code"),
    "method-body": _edit("return self.size * n",
                         "total = 0\n        for _ in range(n):\n            total += self.size\n        return total"),
    "a-same-codec-cookie": "# -*- coding: utf-8 -*-\n" + PRISTINE,
}

REFUSED = {
    # how the interpreter decodes the file
    "bom": ("\ufeff" + PRISTINE + "\nsys.modules['" + PATCH + "\n", "decodes"),
    "raw-unicode-escape-cookie": ("# -*- coding: raw_unicode_escape -*-\n" + PRISTINE
                                  + "#\\u000aimport _pytest.reports as r\\u000ar.TestReport.outcome = 1\n", "decodes"),
    "unknown-codec": ("# -*- coding: no-such-codec -*-\n" + PRISTINE, "decodes"),
    # code at import (module or class level), names the file already has
    "module-level-names-present": (PRISTINE + "sys.modules['" + PATCH + "\n", "outside function bodies"),
    "class-level": (_edit("    size = 2\n", "    size = 2\n    hook = sys.modules\n"), "outside function bodies"),
    "new-import": (_edit("import sys\n", "import sys\nimport gc\n"), "outside function bodies"),
    "changed-default": (_edit("def clamp(x, lo, hi):", "def clamp(x, lo, hi=sys.modules):"), "outside function bodies"),
    "new-function": (PRISTINE + "\ndef pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n",
                     "outside function bodies"),
    # inside a function: names of the file but not of the function
    "module-name-in-function": (_edit("    return x\n", "    sys.modules['" + PATCH + "\n    return x\n"), "uses names"),
    # a function whose own code reaches the interpreter: run only as it was
    "borrowed-module-new-attrs": (_edit("return name in sys.modules",
                                        "sys.modules['" + PATCH + "\n    return name in sys.modules"), "reaches past"),
    "reach-function-own-names": (_edit("return name in sys.modules", "found = sys.modules.get(name)\n"
                                       "    return found is not None"), "reaches past"),
    "local-named-like-an-attr": (_edit("    return x\n", "    outcome = 1\n    return x.outcome if outcome else x\n"),
                                 "uses names"),
    "class-body-reads-a-global": (_edit("    return x\n", "    class C:\n        y = sys\n        sys = 1\n    return x\n"),
                                  "uses names"),
    "nested-def-binds-a-global-name": (_edit("    return x\n", "    def g():\n        sys = 1\n    return x if sys else x\n"),
                                       "uses names"),
    "dunder-walk": (_edit("    return x\n", "    return ().__class__.__base__.__subclasses__()\n"), "uses names"),
    "dunder-method": (_edit("    return x\n", "    class A:\n        def __eq__(s, o):\n            return True\n"
                            "    return A()\n"), "uses names"),
    "format-string-reach": (_edit("    return x\n", "    return '{0.__globals__}'.format(clamp)\n"), "uses names"),
    "import-in-function": (_edit("    return x\n", "    import _pytest.reports\n    return x\n"), "uses names"),
    "global-declaration": (_edit("    return x\n", "    global LIMIT\n    LIMIT = 0\n    return x\n"), "uses names"),
    "match-pattern-attr": (_edit("    return x\n", "    match x:\n        case int(real=r):\n            return r\n"
                                 "    return x\n"), "uses names"),
    "keyword-argument": (_edit("    return x\n", "    return dict(x, modules=1)\n"), "uses names"),
    "getattr-with-a-string": (_edit("    return x\n", "    return getattr(x, 'mod' + 'ules')\n"), "uses names"),
    "system-exit": (_edit("    return x\n", "    raise SystemExit(0)\n"), "uses names"),
    # files that do not compile
    "syntax-error": (_edit("    return x\n", "    return x +\n"), "does not compile"),
    "nul-byte": (_edit("    return x\n", "    return x\x00\n"), "does not compile"),
    "return-at-module-level": (PRISTINE + "return 1\n", "does not compile"),
    "deep-unary": (PRISTINE + "y = " + "-" * 5000 + "1\n", "does not compile"),
    "deep-lambda": (PRISTINE + "y = " + "lambda: " * 3100 + "0\n", "does not compile"),
    "undecodable": (PRISTINE.encode() + b"y = '\xff\xfe'\n", "does not compile"),
    "too-large": (PRISTINE + "#" * (1 << 20), "bytes (at most"),
}


@pytest.mark.parametrize("case", sorted(ADMITTED))
def test_fixes_are_admitted(case):
    assert _check(ADMITTED[case]) is None


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_reaches_for_the_grader_are_refused_with_a_reason(case):
    edited, why = REFUSED[case]
    refusal = _check(edited)
    assert refusal is not None and why in refusal.message, (case, refusal)
    assert refusal.kind == ("invalid" if why in ("does not compile", "bytes (at most") else "hack"), refusal


def test_every_injected_bug_of_the_vendored_package_is_admitted():
    """The factory runs the buggy file through the same graded tree: a bug the rule refused would be
    no task at all (and an "undo" edit restores pristine bytes, which are never checked)."""
    src = DATA.read_text(encoding="utf-8")
    bugs = injections("minicalc/__init__.py", src)
    assert len(bugs) >= 10
    for bug in bugs:
        assert check_edit("minicalc/__init__.py", src.encode(), bug.source.encode()) is None, (bug.function, bug.operator)


def test_a_function_that_reaches_runs_as_it_was_or_as_the_bug_left_it():
    """``loaded`` uses ``sys``: its injected version and its pristine one run; any other body does not."""
    buggy = _edit("return name in sys.modules", "return name not in sys.modules").encode()
    other = _edit("return name in sys.modules", "return not (name not in sys.modules)").encode()
    both = _edit("    return x\n", "    return min(x, hi)\n", buggy.decode()).encode()
    pristine = PRISTINE.encode()
    assert check_edit("pkg/__init__.py", pristine, buggy, buggy) is None
    assert check_edit("pkg/__init__.py", pristine, both, buggy) is None  # the bug left, another function fixed
    assert "reaches past" in check_edit("pkg/__init__.py", pristine, buggy).message  # not the task's bug
    assert "reaches past" in check_edit("pkg/__init__.py", pristine, other, buggy).message
