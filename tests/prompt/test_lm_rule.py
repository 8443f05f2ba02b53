"""The LM reflector's prompt and its cheap filter: one general rule in, restatements and rambles out.

The replies below marked "recorded" are real Qwen2.5-Coder-1.5B-Instruct drafts (served by `evolve serve`
on 127.0.0.1) from benchmarks/results/reflector_lm.json, with the records they answered."""

from __future__ import annotations

from evolve.prompt.reflect.lm_rule import filter_rule, pick_records, render_rule_prompt

HE = {"task_id": "HumanEval/0", "passed": False, "feedback": "WrongAnswer",
      "inputs": "from typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
                '    """ Check if in given list of numbers, are any two numbers closer to each other than\n'
                '    given threshold.\n    >>> has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3)\n    True\n"""',
      "output": "def has_close_elements(numbers, threshold):\n    return False"}
GYM = {"task_id": "gym/7", "passed": False, "feedback": "WrongAnswer: input ([2, 5], 5), expected 1, got 0",
       "inputs": "Take the numbers in xs. Return how many are at most k.\ndef f(xs, k):\nf([1, 9], 4) == 1",
       "output": "def f(xs, k):\n    return sum(1 for x in xs if x < k)"}


def test_a_general_rule_is_kept_and_its_bullet_or_quotes_dropped():
    assert filter_rule("Include the boundary value k.", "stop", [GYM], []) == ("Include the boundary value k.", None)
    assert filter_rule('- "Check the empty list before indexing."', "stop", [HE], [])[0] == \
        "Check the empty list before indexing."
    assert filter_rule("The general rule is:\nHandle the empty list first.", "stop", [GYM], [])[0] == \
        "Handle the empty list first."
    # words the task uses in prose may appear in a rule ("numbers", "threshold" as English, not as code)
    assert filter_rule("Compare every pair of numbers, not only neighbours.", "stop", [HE], [])[1] is None


def test_restatements_rambles_and_truncations_are_refused():
    cases = {
        "Make has_close_elements compare every pair.": "has_close_elements",
        "Return how many numbers are at most 4.": "number 4",
        "Include the boundary.\nAlso check the input.": "2 lines",
        "Write a Python function that takes two integers, `n` and `k`, and returns the largest number from 1 to "
        "`n` that is at most `k`, or -1 when there is none.": "longer than",
        "Be careful.": "fewer than",
        "": "empty",
    }
    for reply, why in cases.items():
        rule, reason = filter_rule(reply, "stop", [HE, GYM], [])
        assert rule is None and why in reason, (reply, reason)
    assert "truncated" in filter_rule("Include the", "length", [GYM], [])[1]
    assert "already" in filter_rule("Handle the empty list.", "stop", [GYM], ["Handle the empty list."])[1]


# Recorded: Qwen2.5-Coder-1.5B-Instruct's 4 drafts for the rule prompt over the gym teacher's failures on
# 8 hard-tier tasks (benchmarks/results/reflector_lm.json, variants row 0-3): general, so all are kept.
RECORDED_15B = ["The assistant should return the correct type and value for each input, and handle any exceptions "
                "that may occur.",
                "The assistant should check if the input values are valid and then proceed with the computation.",
                "The assistant should check the input type and range before performing the operations to ensure "
                "the correct results.",
                "The assistant should return the correct type and value for each input."]


def test_the_recorded_drafts_of_the_15b_pass_and_a_restatement_of_them_does_not():
    for reply in RECORDED_15B:
        assert filter_rule(reply, "stop", [GYM], []) == (reply, None)
    restated = "The assistant should return how many numbers in xs are at most 4."
    assert "number 4" in filter_rule(restated, "stop", [GYM], [])[1]


def test_the_prompt_asks_for_one_rule_over_several_tasks():
    records = [GYM, {**GYM, "output": "x"}, {**GYM, "output": "y"}, HE]
    picked = pick_records(records, per_task=2)
    assert [r["task_id"] for r in picked] == ["gym/7", "gym/7", "HumanEval/0"]  # more tasks, fewer repeats
    text = render_rule_prompt("Write a Python function that solves the task.", picked,
                              [{"signature": "WrongAnswer", "count": 3}], 3, 8)
    assert "Write a Python function that solves the task." in text and "has_close_elements" in text
    assert "ONE general rule" in text and "Do not name any function, variable or number" in text
    assert "- WrongAnswer: 3" in text and "3 failures in 8 attempts" in text
