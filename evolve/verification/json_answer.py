"""Replies that answer with a JSON value (``meta["reply_format"] == "json-answer"``): CodeI/O's tasks.

The model reasons in prose and puts its final answer between ``<answer>`` and ``</answer>``, as
reasoning-gym's prompts ask; the answer is the *last* such span, stripped (reasoning-gym's
``extract_answer``). The span is parsed as JSON here, in the trusted parent, and becomes a small
program the sandbox runs, so the verdict comes from the same machinery as every other task:

- ``meta["answer"] == "output"`` (predict the output for a given input): the program returns the
  parsed value; the task's one hidden test expects the reference's output;
- ``meta["answer"] == "input"`` (predict a feasible input for a given output): the program runs the
  reference code (``meta["reference_code"]``) on the parsed object as keyword arguments and returns its
  output through a JSON round trip; the hidden test expects the given output. Any input that yields the
  output passes. Departure from reasoning-gym, whose score compares with the one input it generated:
  this is the CodeI/O paper's check (re-execution), and a feasible input is what the question asks.

The answer text reaches the program only as a string literal (``repr``), never as code. Failure
classes: ``NoAnswer`` (no answer span), ``AnswerNotJson`` (the span is not one JSON value; for an
input, not a JSON object).
"""

from __future__ import annotations

import json

from evolve.verification.model_reply import Extraction

ANSWER_CLASSES = ("NoAnswer", "AnswerNotJson")
ANSWER_FN = "answer"  # the entry point of every json-answer task
_OPEN, _CLOSE = "<answer>", "</answer>"
MAX_ANSWER_CHARS = 20_000  # a longer span is not parsed (json.loads on model text stays cheap)


def answer_span(text: str) -> str | None:
    """The last ``<answer>...</answer>`` span, stripped, or None: the last match of reasoning-gym's
    ``re.finditer(r"<answer>\\s?(.*?)\\s?</answer>", DOTALL)``, found with ``str.find`` (linear: that regex
    rescans to the end of the text from every unclosed ``<answer>``, quadratic on a reply made of them)."""
    last, pos = None, 0
    while (start := text.find(_OPEN, pos)) >= 0 and (end := text.find(_CLOSE, start + len(_OPEN))) >= 0:
        last, pos = text[start + len(_OPEN):end], end + len(_CLOSE)
    return None if last is None else last.strip()


def _program(task_meta: dict, answer: str) -> str:
    if task_meta.get("answer") == "input":
        return (f"{task_meta['reference_code']}\n\n\ndef {ANSWER_FN}():\n    import json\n"
                f"    return json.loads(json.dumps(main_solution(**json.loads({answer!r}))))\n")
    return f"def {ANSWER_FN}():\n    import json\n    return json.loads({answer!r})\n"


def read_json_answer(task, text: str) -> Extraction:
    """The program that checks a reply's answer, or a reply failure class (module docstring)."""
    span = answer_span(text)
    if span is None:
        return Extraction("", False, "NoAnswer", "the reply has no <answer>...</answer> span")
    if len(span) > MAX_ANSWER_CHARS:
        return Extraction("", False, "AnswerNotJson", f"the answer is {len(span)} characters, over {MAX_ANSWER_CHARS}")
    try:
        value = json.loads(span)
    except (ValueError, RecursionError) as e:
        return Extraction("", False, "AnswerNotJson", f"the answer is not a JSON value ({e}): {span[:160]!r}")
    if task.meta.get("answer") == "input" and not isinstance(value, dict):
        return Extraction("", False, "AnswerNotJson",
                          f"an input is a JSON object of the input variables, got {type(value).__name__}: {span[:160]!r}")
    return Extraction(_program(task.meta, span), False)
