"""The pooled reflective view (issue 37 item 4) and demonstration challengers (item 5), on the real
evolver, the real offline reflector (its requests recorded in a MemoryRecorder) and the real LM reflector
behind an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import random
import re

import pytest
from fake_openai import FakeOpenAI
from prompt_helpers import rollout

from evolve.prompt import Candidate, MemoryRecorder, PromptEvolutionConfig, PromptEvolver, make_reflector
from evolve.prompt.reflective_dataset import rollout_record, shorten_middle

SEED = Candidate({"system": "Write a Python function that solves the task.", "lessons": "", "demos": ""})


def test_shorten_middle_keeps_head_and_tail_and_says_how_much_was_cut():
    code = "def solve(xs):\n" + "".join(f"    step_{i} = {i}\n" for i in range(200)) + "    return FINAL\n"
    out = shorten_middle(code, 300)
    assert len(out) <= 300 and out.startswith("def solve(xs):\n") and out.endswith("    return FINAL\n")
    cut = int(re.search(r"\.\.\. \[(\d+) chars cut\] \.\.\.", out).group(1))
    mark = f"\n... [{cut} chars cut] ...\n"
    assert len(out) - len(mark) + cut == len(code)  # head + tail + what was cut is the whole text
    assert shorten_middle("short", 300) == "short" and shorten_middle("", 10) == ""
    assert len(shorten_middle("x" * 50, 8)) == 8  # below the mark's own length: head and tail only


def test_a_pooled_record_keeps_the_reply_s_end_and_expected_against_got():
    cfg = PromptEvolutionConfig(reflection_view="pooled", max_field_chars=200)
    long = "def f(xs):\n" + "    x = 1\n" * 100 + "    return xs[0] + 1  # THE BUG\n"
    rec = rollout_record(rollout("t", False, "TypeMismatch", "([1, 2],)", "2", "2.0", completion=long,
                                 prompt="Write f(xs). " * 60), cfg)
    assert rec["output"].endswith("# THE BUG\n") and len(rec["output"]) <= 200 and rec["output_truncated"]
    assert len(rec["inputs"]) <= 200 and "chars cut" in rec["inputs"]
    assert (rec["class"], rec["call"], rec["expected"], rec["got"]) == ("TypeMismatch", "([1, 2],)", "2", "2.0")
    old = rollout_record(rollout("t", False, completion=long), PromptEvolutionConfig(max_field_chars=200))
    assert old["output"].endswith("…[truncated]") and "class" not in old  # the generation view is as it was


def _step(kind: str, task: str, n: int = 2) -> list:
    return [rollout(task, False, kind, f"([{i}],)", "1", "0", completion=f"def f(xs):\n    return {i}\n",
                    sample_index=i) for i in range(n)] + [rollout(f"{task}-ok", True)]


STEPS = [_step("TypeMismatch", "a"), _step("WrongAnswer", "b"), _step("SyntaxError", "c")]


def _offline_datasets(window: int, steps=STEPS, **kw) -> tuple[list[dict], PromptEvolver]:
    cfg = PromptEvolutionConfig(reflection_view="pooled", failure_window=window, **kw)
    rec = MemoryRecorder()
    ev = PromptEvolver(cfg, make_reflector(cfg, rec), SEED)
    for gen, rolls in enumerate(steps):
        ev.propose(ev.current(), rolls, random.Random(gen), generation=gen + 1)
    return [c.request["dataset"] for c in rec.calls], ev


def test_failures_are_pooled_over_the_window_and_grouped_by_class():
    datasets, _ = _offline_datasets(window=3)
    last = datasets[-1]
    assert last["generations"] == [1, 2, 3]
    assert {r["generation"] for r in last["records"] if not r["passed"]} == {1, 2, 3}
    assert {c["class"]: c["generations"] for c in last["classes"]} == {
        "TypeMismatch": [1], "WrongAnswer": [2], "SyntaxError": [3]}
    assert last["n_failures"] == 6 and last["n_rollouts"] == 9
    narrow, _ = _offline_datasets(window=2)
    assert narrow[-1]["generations"] == [2, 3]  # the window is bounded: generation 1 has left
    assert {r["generation"] for r in narrow[-1]["records"]} == {2, 3}


def test_the_window_survives_the_evolver_s_state_so_resume_pools_the_same():
    """A resumed evolver (state_dict -> from_state_dict) builds the same next dataset as one that ran on."""
    datasets, ev = _offline_datasets(window=3, steps=STEPS[:2])
    rec = MemoryRecorder()
    resumed = PromptEvolver.from_state_dict(ev.state_dict(), make_reflector(ev.config, rec))
    ev.reflector = make_reflector(ev.config, MemoryRecorder())
    ran_on = ev.reflector.recorder
    for e in (ev, resumed):
        e.propose(e.current(), STEPS[2], random.Random(7), generation=3)
    assert ran_on.calls[0].request == rec.calls[0].request
    assert rec.calls[0].request["dataset"]["generations"] == [1, 2, 3]


def _successes(task: str, purpose: str, marker: str) -> list:
    rs = [rollout(task, True, completion=f"def f(xs):\n    return {marker}\n", prompt=f"Write f for {task}.",
                  sample_index=i) for i in range(2)]
    for r in rs:
        r.purpose = purpose
    return rs


def test_demonstrations_come_only_from_training_tasks():
    """Held-out, validation-candidate and guided successes never reach a demonstration set, however the
    draw falls; training successes do, as challengers of their own kind."""
    cfg = PromptEvolutionConfig(reflection_view="pooled", demo_challengers=True, max_demos=2, failure_window=3)
    leaked, demo_sets = [], 0
    for seed in range(12):
        ev = PromptEvolver(cfg, make_reflector(cfg, MemoryRecorder()), SEED)
        for gen in range(3):
            rolls = (_step("WrongAnswer", f"w{gen}") + _successes(f"train{gen}", "train", f"TRAIN{gen}")
                     + _successes(f"held{gen}", "heldout", "HELDOUT") + _successes(f"val{gen}", "candidate", "HELDOUT")
                     + _successes(f"guided{gen}", "guided", "HELDOUT"))
            for p in ev.propose(ev.current(), rolls, random.Random(seed * 10 + gen), generation=gen):
                demo_sets += p.kind == "swap-demos" and "TRAIN" in p.candidate.components["demos"]
                leaked += [p] if "HELDOUT" in p.candidate.components.get("demos", "") else []
    assert demo_sets >= 12 and not leaked


class _Rules(FakeOpenAI):
    def __init__(self):
        super().__init__(lambda body: [("Check the type of every returned value.", "stop")] * int(body["n"]))


@pytest.fixture
def lm():
    server = _Rules()
    yield server
    server.stop()


def test_the_lm_sees_classes_with_expected_against_got_within_its_budget(lm):
    cfg = PromptEvolutionConfig(reflection_lm="openai/local", api_base=lm.url, timeout_s=10, retries=0,
                                reflection_view="pooled", failure_window=3, reflection_prompt_chars=1200,
                                components=("system", "lessons"), reflection_minibatch_size=12)
    ev = PromptEvolver(cfg, make_reflector(cfg, MemoryRecorder()), SEED)
    steps = [_step(k, f"t{i}", 3) for i, k in enumerate(["TypeMismatch", "WrongAnswer", "SyntaxError"])]
    for gen, rolls in enumerate(steps):
        ev.propose(ev.current(), rolls, random.Random(gen), generation=gen)
    content = lm.requests[-1]["messages"][0]["content"]
    assert len(content) <= 1200
    heads = re.findall(r"^## (\w+): (\d+) failures", content, re.M)
    assert heads and {h for h, _ in heads} <= {"TypeMismatch", "WrongAnswer", "SyntaxError"}
    assert "Expected: 1\nGot: 0" in content and "generations 0" in content
    wide = PromptEvolutionConfig(**{**cfg.to_dict(), "reflection_prompt_chars": 50000})
    ev = PromptEvolver(wide, make_reflector(wide, MemoryRecorder()), SEED)
    for gen, rolls in enumerate(steps):
        ev.propose(ev.current(), rolls, random.Random(gen), generation=gen)
    full = lm.requests[-1]["messages"][0]["content"]
    assert len(full) > 1200 and {h for h, _ in re.findall(r"^## (\w+): (\d+)", full, re.M)} == {
        "TypeMismatch", "WrongAnswer", "SyntaxError"}  # with room, every class of the window is shown


def _long_step(gen: int) -> list:
    body = "".join(f"    v{i} = xs[{i}] + {i}\n" for i in range(25))  # ~500 characters a reply
    fails = [rollout(f"f{gen}-{i}", False, "WrongAnswer", f"([{i}],)", "1", "0", completion=f"def f(xs):\n{body}"
                     f"    return v{i}\n", prompt="Write f(xs). " * 30) for i in range(6)]
    wins = [rollout(f"w{gen}-{i}", True, completion=f"def f(xs):\n{body}    return {i}\n", prompt="Write f. " * 40)
            for i in range(4)]
    for r in fails + wins:
        r.purpose = "train"
    return fails + wins


@pytest.mark.parametrize("view", ["pooled", "generation"])
def test_the_demonstration_pool_does_not_take_the_reflector_s_failures(view):
    """An LM reflector never reads the demonstration pool: with its own budget (the default) the failures a
    reflection sees are the same with demonstrations on as off; under the recorded rule ("shared", what a
    run made before the field reads as) they gave way to it (HumanEval: 2-3 examples of 4-5)."""
    def records(**kw) -> tuple[int, int]:
        cfg = PromptEvolutionConfig(reflection_view=view, max_reflection_chars=4000, max_field_chars=600, **kw)
        rec = MemoryRecorder()
        ev = PromptEvolver(cfg, make_reflector(cfg, rec), SEED)
        ev.propose(ev.current(), _long_step(1), random.Random(0), generation=1)
        ds = rec.calls[-1].request["dataset"]
        return sum(not r["passed"] for r in ds["records"]), len(ds["demo_pool"])

    off, own, shared = records(), records(max_demos=2), records(max_demos=2, demo_budget="shared")
    assert off[0] >= 2 and off[1] == 0
    assert own == (off[0], 4)  # the same failures, and the pool whole
    assert shared[0] < off[0] and shared[1] > 0
    state = PromptEvolver(PromptEvolutionConfig(max_demos=2), make_reflector(PromptEvolutionConfig(),
                                                                            MemoryRecorder()), SEED).state_dict()
    del state["config"]["demo_budget"]  # an evolver state recorded before the field
    assert PromptEvolver.from_state_dict(state, make_reflector(PromptEvolutionConfig(), MemoryRecorder())
                                         ).config.demo_budget == "shared"
