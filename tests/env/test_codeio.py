"""CodeI/O tasks (evolve/env/codeio.py) and json-answer replies (evolve/verification/json_answer.py), in the real
sandbox: a problem's reference runs there to make the task, a reply's answer runs there to judge it.

The synthetic problems below have reasoning-gym's fields and shapes; the real data file is used where the
package is installed (scripts/setup.sh installs it), as the build script uses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.env.codeio import build_tasks, draw_seed, pick, task_for
from evolve.verification import Verifier, load_pipeline
from evolve.verification.json_answer import answer_span, read_json_answer
from evolve.verification.reply_verifier import ReplyVerifier

REPO = Path(__file__).resolve().parents[2]


def _problem(index: int, code: str, generator: str) -> dict:
    return {"index": index, "task_description": f"problem {index}", "input_output_spec": "Input: ...\nOutput: ...",
            "code_sample": code, "input_generator": generator, "difficulty": 8}


PARITY = _problem(1, "def main_solution(x):\n    return {'odd': x % 2 == 1, 'half': x // 2}\n",
                  "def generate_inputs(rng):\n    return {'x': rng.randint(0, 99)}\n")
SQUARES = _problem(2, "def main_solution(n):\n    return [i * i for i in range(n)]\n",
                   "def generate_inputs(rng):\n    return {'n': rng.randint(1, 6)}\n")
CLOCK = _problem(3, "import time\ndef main_solution(x):\n    return time.perf_counter_ns() + x\n",
                 "def generate_inputs(rng):\n    return {'x': 1}\n")
RAISES = _problem(4, "def main_solution(x):\n    return 1 / x\n", "def generate_inputs(rng):\n    return {'x': 0}\n")
NUMPY = _problem(5, "import numpy as np\ndef main_solution(x):\n    return float(np.sqrt(x))\n",
                 "def generate_inputs(rng):\n    return {'x': 4}\n")
UNPLAIN = _problem(6, "def main_solution(x):\n    return {1, 2, x}\n", "def generate_inputs(rng):\n    return {'x': 3}\n")


@pytest.fixture(scope="module")
def verifier():
    with ReplyVerifier(Verifier(load_pipeline(REPO / "verifiers" / "codeio.toml"), jobs=2)) as v:
        yield v


def test_the_build_keeps_deterministic_plain_references_and_counts_the_rest(verifier):
    tasks, dropped = build_tasks(verifier.inner, [PARITY, SQUARES, CLOCK, RAISES, NUMPY, UNPLAIN], seed=0)
    assert sorted(t.meta["codeio_index"] for t in tasks) == [1, 2]
    assert dropped == {"needs_package": 1, "raised_or_unplain": 2, "nondeterministic": 1, "too_long": 0}
    again, _ = build_tasks(verifier.inner, [PARITY, SQUARES], seed=0)
    assert [t.to_dict() for t in again] == [t.to_dict() for t in tasks]  # a build is a function of the seed
    other, _ = build_tasks(verifier.inner, [PARITY, SQUARES], seed=1)
    assert [t.to_dict() for t in other] != [t.to_dict() for t in tasks]


def test_an_output_answer_passes_only_when_it_is_the_references_output(verifier):
    task = task_for(PARITY, {"x": 7}, {"odd": True, "half": 3}, "output")
    assert "{'x': 7}" in task.meta["chat_user"] and "predict the output" in task.meta["chat_user"]
    replies = {
        "right": 'Tracing: 7 % 2 == 1.\n<answer>{"odd": true, "half": 3}</answer>',
        "last span counts": '<answer>{"odd": false}</answer> wait, no:\n<answer>{"half": 3, "odd": true}</answer>',
        "equal as Python ==": '<answer>{"odd": true, "half": 3.0}</answer>',
        "wrong": '<answer>{"odd": true, "half": 4}</answer>',
        "python syntax": "<answer>{'odd': True, 'half': 3}</answer>",
        "no tags": '{"odd": true, "half": 3}',
    }
    res = dict(zip(replies, verifier.verify_batch([(task, r) for r in replies.values()]), strict=True))
    assert [k for k, r in res.items() if r.passed] == ["right", "last span counts", "equal as Python =="]
    assert res["wrong"].error_class == "WrongAnswer"
    assert res["python syntax"].error_class == "AnswerNotJson"
    assert res["no tags"].error_class == "NoAnswer"


def test_any_input_the_reference_maps_to_the_output_passes(verifier):
    task = task_for(PARITY, {"x": 7}, {"odd": True, "half": 3}, "input")
    assert task.meta["reference_answer"] == '{"x": 7}'
    replies = ['<answer>{"x": 7}</answer>', '<answer>{"x": 6}</answer>', '<answer>{"y": 7}</answer>',
               "<answer>[7]</answer>"]
    got = verifier.verify_batch([(task, r) for r in replies])
    assert [r.passed for r in got] == [True, False, False, False]
    assert got[1].error_class == "WrongAnswer" and got[2].error_class == "TypeError"
    assert got[3].error_class == "AnswerNotJson"  # an input is an object of the input variables


def test_answer_text_is_data_never_code(verifier, tmp_path):
    """A hostile answer reaches the program only as a string literal: it cannot run, so it cannot pass."""
    marker = tmp_path / "ran"
    task = task_for(SQUARES, {"n": 3}, [0, 1, 4], "output")
    payloads = [f'"\'); open({str(marker)!r}, "w"); (\'"', f"[0, 1, 4]\"\"\"; open({str(marker)!r}, 'w')",
                '"\\u0027); import os; os._exit(0); (\\u0027"']
    got = verifier.verify_batch([(task, f"<answer>{p}</answer>") for p in payloads])
    assert not any(r.passed for r in got)
    assert not marker.exists()
    # A NUL, a lone surrogate and deep nesting are verdicts too, never a crash of the batch.
    odd = ["<answer>\x00</answer>", "<answer>\ud800</answer>", "<answer>" + "[" * 100_000 + "</answer>"]
    assert [r.passed for r in verifier.verify_batch([(task, o) for o in odd])] == [False] * 3


def test_the_answer_span_is_reasoning_gyms():
    """Against reasoning-gym's regex (the slow reference) on random texts built from the tags' pieces."""
    import random
    import re
    import time

    def reference(text):
        found = list(re.finditer(r"<answer>\s?(.*?)\s?</answer>", text, flags=re.DOTALL))
        return found[-1].group(1).strip() if found else None

    assert answer_span("a <answer> 1 </answer> b <answer>\n[2]\n</answer>") == "[2]"
    assert answer_span("<answer>unclosed") is None
    rng = random.Random(0)
    pieces = ["<answer>", "</answer>", " ", "\n", "1", "x", "<", ">", "answer", "</"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert answer_span(text) == reference(text), text
    t0 = time.perf_counter()  # a reply of unclosed tags: the regex rescans from each (quadratic), this does not
    assert answer_span("<answer>" * 16_000) is None
    assert time.perf_counter() - t0 < 1.0
    task = task_for(SQUARES, {"n": 2}, [0, 1], "output")
    assert read_json_answer(task, "<answer>[0, 1]</answer>").error_class is None


def test_a_built_file_is_a_suite_the_loop_reads(verifier, tmp_path):
    from evolve.env.task_source import load_task_source

    tasks, _ = build_tasks(verifier.inner, [PARITY, SQUARES], seed=0)
    path = tmp_path / "codeio.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    env = load_task_source(str(path), 0, 0.5)
    read = env.splits()["train"] + env.splits()["heldout"]
    assert sorted(t.task_id for t in read) == sorted(t.task_id for t in tasks)
    right = [(t, f"<answer>{t.meta['reference_answer']}</answer>") for t in read]
    assert all(r.passed for r in env.wrap_verifier(verifier.inner).verify_batch(right))


def test_the_shipped_data_builds_and_its_reference_answers_pass(verifier):
    """On reasoning-gym's own file (installed by scripts/setup.sh): 30 problems, the answers the build
    generated all pass and a perturbed one does not."""
    from evolve.env.codeio import data_path, read_problems

    problems = pick(read_problems(data_path()), 30, 0)
    assert pick(read_problems(data_path()), 10, 0) == problems[:10]  # a larger draw extends a smaller one
    assert len({draw_seed(0, p["index"]) for p in problems}) == 30
    tasks, dropped = build_tasks(verifier.inner, problems, seed=0)
    assert len(tasks) >= 10 and sum(dropped.values()) + len(tasks) == 30
    right = verifier.verify_batch([(t, f"<answer>{t.meta['reference_answer']}</answer>") for t in tasks])
    assert all(r.passed for r in right), [r.trace for r in right if not r.passed][:2]
    outs = [t for t in tasks if t.meta["answer"] == "output"]
    wrong = verifier.verify_batch([(t, '<answer>{"surely": "not this"}</answer>') for t in outs])
    assert not any(r.passed for r in wrong)


def test_the_templates_are_reasoning_gyms_word_for_word():
    """Read from the installed package's source (never imported: it would execute nothing we need)."""
    import ast

    from evolve.env.codeio import INPUT_TEMPLATE, OUTPUT_TEMPLATE, data_path

    source = (data_path().parents[1] / "code" / "codeio.py").read_text()
    consts = {t.id: n.value.value for n in ast.parse(source).body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
    assert OUTPUT_TEMPLATE == consts["OUTPUT_PREDICTION_PROMPT_TEMPLATE"]
    assert INPUT_TEMPLATE == consts["INPUT_PREDICTION_PROMPT_TEMPLATE"]


def test_a_task_file_with_an_unknown_or_incomplete_reply_format_is_refused_in_one_line(tmp_path):
    from evolve.env.task_source import read_task_source
    from evolve.errors import ConfigError

    good = task_for(PARITY, {"x": 7}, {"odd": True, "half": 3}, "input").to_dict()
    for meta, says in [({"reply_format": "json_answer"}, "not one of chat, json-answer"),
                       ({"reply_format": ["chat"]}, "not one of"),
                       ({"reply_format": "json-answer", "answer": "both"}, "meta.answer"),
                       ({"reply_format": "json-answer", "answer": "input"}, "meta.reference_code")]:
        path = tmp_path / "t.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "task_id": "b", "meta": meta}) + "\n")
        with pytest.raises(ConfigError, match=f"t.jsonl:2: .*{says}"):
            read_task_source(str(path))
