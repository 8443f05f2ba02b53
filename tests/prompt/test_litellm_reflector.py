"""The litellm reflector against a real OpenAI-compatible HTTP server on 127.0.0.1 (no paid API)."""

import random
import time

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
from evolve.prompt.reflect.litellm_reflector import parse_reply


class Scripted(FakeOpenAI):
    """Replies from a script: ("error", status), ("sleep", s) or (content, finish_reason)."""

    def __init__(self):
        self.script: list[tuple] = []
        super().__init__(self._next)

    def _next(self, body):
        step = self.script.pop(0) if self.script else ('{"new_instruction": "default"}', "stop")
        return step if step[0] in ("error", "sleep") else [step]


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
    kw = {"proposals_per_step": 1, "timeout_s": 10, **kw}
    return PromptEvolutionConfig(reflection_lm="openai/local-reflector", api_base=url, retries=2, backoff_s=0.0,
                                 components=("system",), **kw)


def dataset(cfg):
    rs = [empty_failure("a"), div_failure("b"), rollout("c", True)]
    return build_reflective_dataset(rs, cfg, random.Random(0))


SEED = Candidate({"system": "Write a Python function."})


def test_reply_parsing_rejects_empty_truncated_and_malformed():
    assert parse_reply('{"new_instruction": "Be careful."}', "stop", 100) == ("Be careful.", None)
    assert parse_reply('```json\n{"new_instruction": "X"}\n```', "stop", 100) == ("X", None)
    assert parse_reply("```\nPlain fenced\n```", "stop", 100) == ("Plain fenced", None)
    assert parse_reply('{"new_instruction": "Cut', "length", 100)[0] is None
    assert "empty" in parse_reply("  ", "stop", 100)[1]
    assert "fence" in parse_reply("```\nno end", "stop", 100)[1]
    assert "JSON" in parse_reply('{"new_instruction": "unclosed', "stop", 100)[1]
    assert "longer" in parse_reply("x" * 101, "stop", 100)[1]


def test_proposal_through_the_local_server_is_recorded(fresh):
    fresh.script[:] = [('{"new_instruction": "Handle empty lists and use // for integers."}', "stop")]
    rec = MemoryRecorder()
    cfg = config(fresh.url)
    drafts = make_reflector(cfg, rec).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert drafts[0].error is None
    assert drafts[0].components == {"system": "Handle empty lists and use // for integers."}
    (req,) = fresh.requests
    assert req["path"] == "/v1/chat/completions" and req["model"] == "local-reflector"
    prompt = req["messages"][0]["content"]
    assert "Write a Python function." in prompt and "ValueError" in prompt and "new_instruction" in prompt
    (call,) = rec.calls
    assert call.model == "openai/local-reflector" and call.error is None and call.tokens["prompt"] == 5
    assert drafts[0].lm_call_ids == [call.id]


def test_errors_are_retried_then_succeed(fresh):
    fresh.script[:] = [("error", 500), ("error", 503), ('{"new_instruction": "Third time."}', "stop")]
    cfg = config(fresh.url)
    drafts = make_reflector(cfg, MemoryRecorder()).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert drafts[0].components == {"system": "Third time."}
    assert len(fresh.requests) == 3


def test_timeouts_are_retried(fresh):
    fresh.script[:] = [("sleep", 2.5), ('{"new_instruction": "After a timeout."}', "stop")]
    cfg = config(fresh.url, timeout_s=1.0)
    t0 = time.perf_counter()
    drafts = make_reflector(cfg, MemoryRecorder()).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert drafts[0].components == {"system": "After a timeout."}
    assert len(fresh.requests) == 2 and time.perf_counter() - t0 < 10


def test_persistent_errors_become_a_recorded_failed_proposal_and_the_run_goes_on(fresh):
    fresh.script[:] = [("error", 500)] * 3 + [('{"new_instruction": "Later."}', "stop")]
    rec = MemoryRecorder()
    cfg = config(fresh.url, proposals_per_step=2)
    ev = PromptEvolver(cfg, make_reflector(cfg, rec), SEED)
    props = ev.propose(SEED, [empty_failure("a")], random.Random(0))
    assert [p.candidate.components["system"] for p in props] == ["Later."]
    assert len(ev.failed) == 1 and "InternalServerError" in ev.failed[0]["error"]
    assert rec.calls[0].error and rec.calls[0].response is None and rec.calls[1].error is None


def test_truncated_reply_is_rejected_never_a_prompt(fresh):
    fresh.script[:] = [('{"new_instruction": "Handle the empty', "length"), ("", "stop")]
    rec = MemoryRecorder()
    cfg = config(fresh.url, proposals_per_step=2)
    ev = PromptEvolver(cfg, make_reflector(cfg, rec), SEED)
    assert ev.propose(SEED, [empty_failure("a")], random.Random(0)) == []
    assert [f["error"].split(":")[0] for f in ev.failed] == ["rejected", "rejected"]
    assert "truncated" in ev.failed[0]["error"] and "empty" in ev.failed[1]["error"]
    assert len(rec.calls) == 2  # both recorded


def test_replay_needs_no_server(fresh):
    fresh.script[:] = [('{"new_instruction": "Recorded."}', "stop")]
    rec = MemoryRecorder()
    cfg = config(fresh.url)
    live = make_reflector(cfg, rec).reflect(SEED, dataset(cfg), random.Random(0), 1)
    n = len(fresh.requests)
    again = make_reflector(cfg, ReplayRecorder(rec)).reflect(SEED, dataset(cfg), random.Random(0), 1)
    assert len(fresh.requests) == n
    assert again[0].components == live[0].components == {"system": "Recorded."}


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
    """Issue #24: the reflector's fence parsing (was ``re.search(r"```(?:json|text|markdown)?\\s*\\n?(.*?)```",
    re.S)``) finds what that regex finds, in linear time on regex-hostile replies."""
    import re

    from evolve.prompt.reflect.litellm_reflector import fenced_body

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
        assert parse_reply(hostile, "stop", 100)[0] is None
        assert time.perf_counter() - t0 < 0.5
