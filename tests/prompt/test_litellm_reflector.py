"""The litellm reflector against a real OpenAI-compatible HTTP server on 127.0.0.1 (no paid API)."""

import random
import sys
import time
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from prompt_helpers import div_failure, empty_failure, rollout

from evolve.prompt import (
    Candidate,
    MemoryRecorder,
    PromptEvolutionConfig,
    PromptEvolver,
    ReplayRecorder,
    build_reflective_dataset,
    make_reflector,
)

REPO = Path(__file__).resolve().parents[2]


class Scripted(FakeOpenAI):
    """Replies from a script: ("error", status), ("sleep", s), or a list of (content, finish_reason) choices."""

    def __init__(self):
        self.script: list = []
        super().__init__(self._next)

    def _next(self, body):
        step = self.script.pop(0) if self.script else [("Check the default case first.", "stop")]
        return step if isinstance(step, tuple) else step


@pytest.fixture(scope="module")
def server():
    s = Scripted()
    yield s
    s.stop()


@pytest.fixture
def fresh(server):
    server.script.clear()
    server.requests.clear()
    return server


def config(url, **kw):
    kw = {"proposals_per_step": 1, "timeout_s": 10, "reflection_drafts": 2, **kw}
    return PromptEvolutionConfig(reflection_lm="openai/local-reflector", api_base=url, retries=2, backoff_s=0.0,
                                 components=("system", "lessons"), **kw)


def dataset(cfg):
    rs = [empty_failure("a"), div_failure("b"), rollout("c", True)]
    return build_reflective_dataset(rs, cfg, random.Random(0))


SEED = Candidate({"system": "Write a Python function.", "lessons": ""})
RULE = "Handle empty lists and use // for integer results."


def test_one_request_samples_drafts_and_each_accepted_rule_becomes_a_lesson(fresh):
    fresh.script[:] = [[(RULE, "stop"), (RULE, "stop"), ("Return 0 when the input is empty.", "stop")]]
    rec = MemoryRecorder()
    cfg = config(fresh.url, proposals_per_step=2, reflection_drafts=3)
    drafts = make_reflector(cfg, rec).reflect(SEED, dataset(cfg), random.Random(0), 2)  # the duplicate dropped
    assert [d.components["lessons"] for d in drafts] == [RULE, "Return 0 when the input is empty."]
    assert all(d.components["system"] == "Write a Python function." and d.kind == "add-lesson" for d in drafts)
    (req,) = fresh.requests  # one request, several drafts
    assert req["path"] == "/v1/chat/completions" and req["model"] == "local-reflector" and req["n"] == 3
    assert req["max_tokens"] <= 64
    prompt = req["messages"][0]["content"]
    assert "Write a Python function." in prompt and "ValueError" in prompt and "ONE general rule" in prompt
    (call,) = rec.calls
    assert call.model == "openai/local-reflector" and call.error is None and call.tokens["prompt"] == 5
    assert [c["content"] for c in call.response["choices"]] == [RULE, RULE, "Return 0 when the input is empty."]
    assert drafts[0].lm_call_ids == [call.id]


def test_refused_drafts_never_become_prompts_and_the_rest_do(fresh):
    fresh.script[:] = [[("Write f(xs) that returns the max of [3, 4].\nIt must return 3.", "stop"),
                        ("Handle the empty", "length"), (RULE, "stop")]]
    cfg = config(fresh.url, proposals_per_step=2, reflection_drafts=3)
    drafts = make_reflector(cfg, MemoryRecorder()).reflect(SEED, dataset(cfg), random.Random(0), 2)
    assert [d.components["lessons"] for d in drafts] == [RULE]


def test_the_rule_is_added_and_the_oldest_line_dropped_when_full(fresh):
    fresh.script[:] = [[(RULE, "stop")]]
    cfg = config(fresh.url, max_lessons=2)
    parent = Candidate({"system": "S.", "lessons": "Old one.\nOld two."})
    (d,) = make_reflector(cfg, MemoryRecorder()).reflect(parent, dataset(cfg), random.Random(0), 1)
    assert d.components["lessons"] == f"Old two.\n{RULE}"


def test_errors_are_retried_then_succeed(fresh):
    fresh.script[:] = [("error", 500), ("error", 503), [("Check the input type first.", "stop")]]
    cfg = config(fresh.url)
    drafts = make_reflector(cfg, MemoryRecorder()).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert drafts[0].components["lessons"] == "Check the input type first."
    assert len(fresh.requests) == 3


def test_a_bad_request_is_not_retried(fresh):
    """A 400 cannot succeed when asked again: one request, recorded as the failed draft."""
    fresh.script[:] = [("error", 400), [("Never reached.", "stop")]]
    cfg = config(fresh.url)
    (d,) = make_reflector(cfg, MemoryRecorder()).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert d.components is None and d.error.startswith("BadRequestError")
    assert len(fresh.requests) == 1


def test_timeouts_are_retried(fresh):
    fresh.script[:] = [("sleep", 2.5), [("Read the whole task before coding.", "stop")]]
    cfg = config(fresh.url, timeout_s=1.0)
    t0 = time.perf_counter()
    drafts = make_reflector(cfg, MemoryRecorder()).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert drafts[0].components["lessons"] == "Read the whole task before coding."
    assert len(fresh.requests) == 2 and time.perf_counter() - t0 < 10


def test_persistent_errors_become_a_recorded_failed_proposal_and_the_run_goes_on(fresh):
    fresh.script[:] = [("error", 500)] * 3 + [[("Return a value on every path.", "stop")]]
    rec = MemoryRecorder()
    cfg = config(fresh.url, proposals_per_step=1)
    ev = PromptEvolver(cfg, make_reflector(cfg, rec), SEED)
    assert ev.propose(SEED, [empty_failure("a")], random.Random(0)) == []
    assert len(ev.failed) == 1 and "InternalServerError" in ev.failed[0]["error"]
    props = ev.propose(SEED, [empty_failure("a")], random.Random(1))
    assert [p.candidate.components["lessons"] for p in props] == ["Return a value on every path."]
    assert rec.calls[0].error and rec.calls[0].response is None and rec.calls[1].error is None


def test_truncated_and_empty_replies_are_rejected_never_a_prompt(fresh):
    fresh.script[:] = [[("Handle the empty", "length"), ("", "stop")]]
    rec = MemoryRecorder()
    cfg = config(fresh.url)
    ev = PromptEvolver(cfg, make_reflector(cfg, rec), SEED)
    assert ev.propose(SEED, [empty_failure("a")], random.Random(0)) == []
    (failed,) = ev.failed
    assert failed["error"].startswith("rejected") and "truncated" in failed["error"] and "empty" in failed["error"]
    assert len(rec.calls) == 1  # recorded


def test_replay_needs_no_server(fresh):
    fresh.script[:] = [[("Recorded rule for replay.", "stop"), ("A second recorded rule.", "stop")]]
    rec = MemoryRecorder()
    cfg = config(fresh.url)
    live = make_reflector(cfg, rec).reflect(SEED, dataset(cfg), random.Random(0), 1)
    n = len(fresh.requests)
    again = make_reflector(cfg, ReplayRecorder(rec)).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert len(fresh.requests) == n
    assert again[0].components == live[0].components == {"system": "Write a Python function.",
                                                         "lessons": "Recorded rule for replay."}


def test_a_failed_call_replays_as_a_failed_call(fresh, tmp_path):
    """A reflection call that failed after its retries is recorded (in the lineage) with its error;
    replaying it needs no server and fails again the same way, instead of stopping the replay."""
    from evolve.lineage import LineageStore
    from evolve.loop.recording import BufferRecorder, replay_recorder

    fresh.script[:] = [("error", 500)] * 3  # the first try and both retries
    buf = BufferRecorder()
    cfg = config(fresh.url)
    live = make_reflector(cfg, buf).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert live and live[0].components is None and "InternalServerError" in live[0].error
    with LineageStore.open(f"sqlite:///{tmp_path / 'l.db'}") as store:
        store.create_run("r", {})
        gid = store.begin_generation("r", None, {})
        buf.flush(store, gid)
        n = len(fresh.requests)
        again = make_reflector(cfg, replay_recorder(store, gid)).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert len(fresh.requests) == n  # nothing was sent
    assert [(d.components, d.error) for d in again] == [(d.components, d.error) for d in live]


def test_fence_parsing_is_the_regex_s_in_linear_time():
    """Issue #24: the GEPA-style rewrite comparator's fence parsing (benchmarks/reflector_lm.py) (was ``re.search(r"```(?:json|text|markdown)?\\s*\\n?(.*?)```",
    re.S)``) finds what that regex finds, in linear time on regex-hostile replies."""
    import re

    sys.path.insert(0, str(REPO / "benchmarks"))
    from reflector_lm import fenced_body, parse_rewrite

    fence = re.compile(r"```(?:json|text|markdown)?\s*\n?(.*?)```", re.S)
    rng = random.Random(0)
    for _ in range(20000):  # small alphabets, so fences, words and whitespace collide often
        s = "".join(rng.choice(["`", "``", "```", " ", "\n", "\t", "json", "text", "x", "{", "js"])
                    for _ in range(rng.randrange(12)))
        m = fence.search(s)
        assert fenced_body(s) == (m.group(1) if m else None), repr(s)
    n = 200_000  # the regex: ~44 s at 20,000 characters of the first case, quadratic beyond
    for hostile in ("```" + " \n" * n + "``", "```json" + " " * n, "``` " * n, "` " * n + "```", "`" * n):
        t0 = time.perf_counter()
        fenced_body(hostile)
        assert parse_rewrite(hostile, "stop", 100)[0] is None
        assert time.perf_counter() - t0 < 0.5
