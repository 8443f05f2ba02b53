"""A real dspy.Module round-trips through a candidate (no LM call is made)."""

import json

import dspy
import pytest

from evolve.errors import ConfigError
from evolve.prompt.dspy_interop import apply_to_dspy, candidate_from_dspy


class QA(dspy.Module):
    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict("question -> answer")
        self.check = dspy.ChainOfThought("question, answer -> verdict")

    def forward(self, question):
        a = self.answer(question=question).answer
        return self.check(question=question, answer=a)


def test_read_evolve_and_write_back():
    prog = QA()
    prog.answer.demos = [dspy.Example(question="2+2?", answer="4").with_inputs("question")]
    cand = candidate_from_dspy(prog)
    assert set(cand.components) == {"answer.instructions", "answer.demos", "check.predict.instructions",
                                    "check.predict.demos"}
    assert json.loads(cand.components["answer.demos"]) == [{"question": "2+2?", "answer": "4"}]
    evolved = cand.with_component("answer.instructions", "Answer with a single number.").with_component(
        "check.predict.demos", json.dumps([{"question": "1+1?", "answer": "2", "verdict": "ok"}]))
    other = QA()
    apply_to_dspy(evolved, other)
    assert other.answer.signature.instructions == "Answer with a single number."
    assert list(other.answer.signature.input_fields) == ["question"]
    assert other.answer.demos[0].inputs().toDict() == {"question": "2+2?"}
    assert other.check.predict.demos[0].verdict == "ok"
    assert set(other.check.predict.demos[0].inputs().keys()) == {"question", "answer"}
    back = candidate_from_dspy(other)
    assert back.components["answer.instructions"] == "Answer with a single number."
    assert json.loads(back.components["check.predict.demos"]) == json.loads(evolved.components["check.predict.demos"])
    assert candidate_from_dspy(apply_to_dspy(back, QA())).id == back.id  # read/write is a fixed point


def test_bad_components_are_config_errors():
    prog = QA()
    with pytest.raises(ConfigError, match="names no predictor"):
        apply_to_dspy(candidate_from_dspy(prog).with_component("nope.instructions", "x"), prog)
    with pytest.raises(ConfigError, match="JSON list"):
        apply_to_dspy(candidate_from_dspy(prog).with_component("answer.demos", "{bad"), prog)
