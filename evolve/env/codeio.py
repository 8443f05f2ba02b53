"""CodeI/O tasks, built offline from reasoning-gym's data: predict a program's output, or a feasible input.

reasoning-gym 0.1.25 ships ``reasoning_gym/data/codeio.jsonl.gz`` (3,002 problems: a description, an
input/output spec, reference code defining ``main_solution`` and an input generator
``generate_inputs(rng)``). Its own loader ``exec``s that code in the calling process; here the reference
and the generator run in the project's sandbox (``Verifier.run_calls``), twice per problem, and a problem
is kept only when both runs return the same plain JSON value (a reference that raises, times out, reads
a clock or returns something JSON cannot hold is dropped, and counted; the sandbox has the standard
library only, so a reference that imports numpy or sympy is dropped too).

Each kept problem becomes one task row of the ordinary task schema (docs/environments.md), so a built
file is a suite like any other (``evolve run --suite runs/codeio/tasks.jsonl``): the question is
reasoning-gym's prompt template (``chat_user``), the reply format ``json-answer``
(``evolve.verification.json_answer``), one hidden test holding the expected value. Which problems, which
input and which direction (output or input prediction, half each as reasoning-gym's default) are drawn
from ``seed`` alone, so a build is reproducible; the file's sha256 is what a run records.

Departure from reasoning-gym: an input prediction passes when the reference maps it to the given output
(the CodeI/O paper's re-execution), not only when it equals the input that was generated.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import random
from pathlib import Path
from typing import cast

from evolve.errors import ConfigError
from evolve.verification.json_answer import ANSWER_FN
from evolve.verification.types import Task, TestCase

DATA_FILE = "codeio.jsonl.gz"
PAIR_FN = "_evolve_codeio_pair"
MAX_VALUE_CHARS = 600  # a longer input or output is not a question to answer by hand: dropped

# reasoning-gym 0.1.25, reasoning_gym/code/codeio.py: its two templates, word for word (tests/env/test_codeio.py
# compares them with the installed file), built from their shared head and tail.
_HEAD = ("\nYou are given a question that requires some input and output variables as follows:\n\n{0}\n\n"
         "The input and output requirements are as follows:\n\n{1}\n\n")
_TAIL = ("\n\nTip: Here is a reference code snippet for this question. You can refer to this code to guide your "
         "reasoning but not copy spans of code directly.\n\n{3}\n")
_JSON_VALUE = ("in the form of a JSON value (object, array, number or string, or one of the following three literal "
               "names: false null true)")
OUTPUT_TEMPLATE = (_HEAD + "Given the following input:\n\n{2}\n\nCan you predict the output without writing any code? "
                   f"Please think and then provide the exact output {_JSON_VALUE} as your final answer. The keys and "
                   "values of the object should strictly match the output requirement as specified." + _TAIL)
INPUT_TEMPLATE = (_HEAD + "Given the following output:\n\n{2}\n\nCan you predict a feasible input without writing any "
                  f"code? Please reason and put your final answer {_JSON_VALUE}, even if the there is only one input "
                  "variable, with keys strictly matching the input variables' names as specified." + _TAIL)


def data_path() -> Path:
    """reasoning-gym's problem file, found without importing the package (its import pulls in a dozen
    dependencies the data does not need: scripts/setup.sh installs it with --no-deps)."""
    spec = importlib.util.find_spec("reasoning_gym")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("CodeI/O needs reasoning-gym's data: pip install --no-deps reasoning-gym==0.1.25 "
                          "(scripts/setup.sh does)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / DATA_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: not found (reasoning-gym 0.1.25 ships it)")
    return path


def read_problems(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [{**json.loads(line), "index": i} for i, line in enumerate(f)]


def draw_seed(seed: int, index: int) -> int:
    """The generator seed of problem ``index`` in a build seeded ``seed``."""
    return int(hashlib.sha256(f"codeio\0{seed}\0{index}".encode()).hexdigest()[:12], 16)


def pick(problems: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` problems, ranked by a seeded hash of their index (a larger ``n`` extends a smaller one)."""
    return sorted(problems, key=lambda p: draw_seed(seed, p["index"]))[:n]


def pair_program(problem: dict) -> str:
    """Reference + generator + one function that draws an input and returns [input, output] as JSON."""
    return (f"from random import Random\n\n{problem['code_sample']}\n\n{problem['input_generator']}\n\n\n"
            f"def {PAIR_FN}(seed):\n    import json\n    inputs = generate_inputs(Random(seed))\n"
            f"    return json.loads(json.dumps([inputs, main_solution(**inputs)]))\n")


def task_for(problem: dict, inputs: dict, output, direction: str) -> Task:
    """One task row: the question in reasoning-gym's words, the expected value as the hidden test."""
    parts = (problem["task_description"], problem["input_output_spec"])
    if direction == "output":
        question = OUTPUT_TEMPLATE.format(*parts, inputs, problem["code_sample"])
    else:
        question = INPUT_TEMPLATE.format(*parts, output, problem["code_sample"])
    meta = {"reply_format": "json-answer", "answer": direction, "chat_user": question,
            "codeio_index": problem["index"], "difficulty": problem.get("difficulty"),
            # The generated answer (like a HumanEval row's canonical_solution: never shown to the policy).
            "reference_answer": json.dumps(output if direction == "output" else inputs)}
    if direction == "input":
        meta["reference_code"] = problem["code_sample"]
    return Task(f"codeio/{problem['index']}/{direction}", "", ANSWER_FN, hidden_tests=(TestCase((), output),),
                suite="codeio", meta=meta)


def build_tasks(verifier, problems: list[dict], seed: int, input_share: float = 0.5) -> tuple[list[Task], dict]:
    """Tasks from ``problems`` (each run twice in the sandbox), and the counts of what was dropped and why.

    The sandbox has the standard library only: a reference that imports numpy, sympy, ... (about a third
    of the data) is dropped as ``needs_package``, so the built suite is CodeI/O's standard-library part."""
    from evolve.verification.sandbox_output import loaded

    jobs = [(Task(f"codeio-build/{p['index']}", "", PAIR_FN), pair_program(p), [(draw_seed(seed, p["index"]),)] * 2)
            for p in problems]
    tasks = []
    dropped = {"needs_package": 0, "raised_or_unplain": 0, "nondeterministic": 0, "too_long": 0}
    for p, reply in zip(problems, verifier.run_calls(jobs), strict=True):
        if reply.load_error is not None and reply.load_error[0] == "ModuleNotFoundError":
            dropped["needs_package"] += 1
            continue
        outcomes = [] if reply.flags or reply.load_error is not None else list(reply.results)
        if len(outcomes) != 2 or any(o.status != "ok" for o in outcomes):
            dropped["raised_or_unplain"] += 1
            continue
        if outcomes[0].raw != outcomes[1].raw:
            dropped["nondeterministic"] += 1
            continue
        pair = cast(list, loaded(outcomes[0]).value)  # [inputs, output]: PAIR_FN returns a list
        inputs, output = pair
        if max(len(json.dumps(inputs)), len(json.dumps(output))) > MAX_VALUE_CHARS:
            dropped["too_long"] += 1
            continue
        rng = random.Random(draw_seed(seed, p["index"]) + 1)
        tasks.append(task_for(p, inputs, output, "input" if rng.random() < input_share else "output"))
    return tasks, dropped
