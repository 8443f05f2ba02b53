"""Chat replies: fenced code is extracted; wrong names, printing and prose are failure classes with
readable traces, never repaired. Verdicts go through the real sandboxed Verifier."""

from __future__ import annotations

import pytest

from evolve.gym.chat import humaneval_split, load_chat_suite, tiny_coder_user, with_chat_rendering
from evolve.verification import Verifier, load_humaneval
from evolve.verification.model_reply import extract, looks_like_prose
from evolve.verification.reply_verifier import ReplyVerifier

DOUBLE = "def f(xs):\n    return [x * 2 for x in xs]\n"


def test_fenced_code_is_extracted_and_prose_around_it_ignored():
    reply = f"Here is the function you asked for:\n```python\n{DOUBLE}```\nIt doubles every number."
    ext = extract(reply, "f")
    assert ext.error_class is None and ext.fenced
    assert ext.code == DOUBLE


def test_the_block_defining_the_entry_point_wins():
    reply = f"```python\nprint(f([1]))\n```\nand\n```python\n{DOUBLE}```"
    assert extract(reply, "f").code == DOUBLE
    helper_first = f"```python\ndef helper(x):\n    return x\n```\n```python\n{DOUBLE}```"
    assert extract(helper_first, "f").code == DOUBLE


def test_wrong_entry_point_names_both():
    ext = extract("```python\ndef sum_even_numbers(xs):\n    return sum(xs)\n```", "f")
    assert ext.error_class == "WrongEntryPoint"
    assert "`f`" in ext.trace and "sum_even_numbers(xs)" in ext.trace


def test_prints_instead_of_returning():
    ext = extract("```python\ndef f(xs):\n    print(sum(xs))\n```", "f")
    assert ext.error_class == "PrintsInsteadOfReturn"
    # a nested helper's return does not count as the entry point's
    nested = "def f(xs):\n    def g():\n        return 1\n    print(g())\n"
    assert extract(nested, "f").error_class == "PrintsInsteadOfReturn"
    assert extract("def f(xs):\n    print(xs)\n    return xs\n", "f").error_class is None


def test_prose_mixed_into_unfenced_code():
    reply = "def f(xs):\n    return sum(xs)\nThis function adds up all of the numbers in the list.\n"
    ext = extract(reply, "f")
    assert ext.error_class == "ProseInCode" and not ext.fenced
    assert "line 3" in ext.trace


def test_no_code_at_all():
    assert extract("I cannot help with that request, sorry.", "f").error_class == "NoCode"
    assert extract("", "f").error_class == "NoCode"


def test_an_ordinary_syntax_error_goes_to_the_verifier():
    ext = extract("```python\ndef f(xs):\n    return [x for x in xs\n```", "f")
    assert ext.error_class is None  # the verifier reports the SyntaxError itself


def test_prose_detector():
    assert looks_like_prose("This function returns the sum of the list.")
    assert not looks_like_prose("return sum(x for x in xs if x > 0)")
    assert not looks_like_prose("# a comment with many plain words in it")


def test_chat_rendering_has_spec_signature_examples():
    task = load_chat_suite("tiny-coder-chat")["heldout"][0]
    user = task.meta["chat_user"]
    assert user == tiny_coder_user(task)
    assert "`f`" in user and "Signature:\ndef f(" in user and "Examples:" in user
    assert task.meta["reply_format"] == "chat"


def test_humaneval_split_is_seeded_and_disjoint():
    train, held = humaneval_split(0, 0.25)
    assert len(train) + len(held) == 164 and not set(train) & set(held)
    assert humaneval_split(0, 0.25) == (train, held)
    assert humaneval_split(1, 0.25)[1] != held


@pytest.fixture(scope="module")
def verifier():
    with ReplyVerifier(Verifier(None, jobs=1)) as v:
        yield v


def test_verdicts_through_the_real_sandbox(verifier):
    task = with_chat_rendering(next(t for t in load_chat_suite("tiny-coder-chat")["train"]
                                    if t.canonical_solution and "def f(xs)" in t.canonical_solution))
    good = f"Sure!\n```python\n{task.canonical_solution}\n```\nDone."
    renamed = good.replace("def f(", "def solve(")
    printed = "```python\ndef f(xs):\n    print(xs)\n```"
    # the verifier alone would run the first block with a def; the extraction picks the entry point's
    two_blocks = f"```python\ndef unused(x):\n    return x\n```\n```python\n{task.canonical_solution}\n```"
    r_good, r_renamed, r_printed, r_two = verifier.verify_batch(
        [(task, good), (task, renamed), (task, printed), (task, two_blocks)])
    assert r_two.passed
    assert r_good.passed and r_good.reward == 1.0
    assert not r_renamed.passed and r_renamed.error_class == "WrongEntryPoint"
    assert "solve(" in r_renamed.trace and r_renamed.stages[0].name == "reply"
    assert r_printed.error_class == "PrintsInsteadOfReturn" and r_printed.reward == 0.0


def test_humaneval_chat_reply_uses_prompt_imports(verifier):
    task = with_chat_rendering(load_humaneval()[0])  # has_close_elements: `from typing import List`
    body = task.canonical_solution
    reply = f"```python\ndef {task.entry_point}(numbers: List[float], threshold: float) -> bool:\n{body}```"
    assert verifier.verify(task, reply).passed
    # non-chat tasks pass through untouched: a continuation of the prompt
    assert verifier.verify(load_humaneval()[0], body).passed
