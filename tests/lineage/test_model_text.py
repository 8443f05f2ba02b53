"""Model text is stored as emitted and read back identically, on SQLite and PostgreSQL: NUL
bytes, other control characters, lone surrogates (undecodable bytes kept as surrogate escapes),
the escape character itself, and text that looks like an escape. Shown escaped on a terminal."""

from __future__ import annotations

from evolve.rollout import Rollout
from evolve.util.text import terminal_safe
from evolve.verification.types import StageResult, VerifyResult

HOSTILE = [
    "def f(xs):\n    return 0\x00\x00",
    "ctrl \x01\x07\x08\x1b[31m\x7f \x85 end",
    b"bytes \xff\xfe\x80 tail".decode("utf-8", "surrogateescape"),  # lone surrogates \udcff \udcfe \udc80
    "high \ud800 alone",
    "the escape \ue000 itself, \ue0000 and \ue000s0041 and \ue000e look-alikes",
    "emoji 🐍 and \u2028 separators \ufeff",
    "",
]


def test_hostile_text_round_trips(store):
    store.create_run("r", {})
    gid = store.begin_generation("r", None, {})
    rolls = []
    for i, text in enumerate(HOSTILE):
        res = VerifyResult("t", 0.0, False, [StageResult("compile", 0.0, False, trace=text)], trace=text,
                           error_class="SyntaxError")
        rolls.append(Rollout(f"t{i}", i, 0, "p" * 64, "w" * 64, [], prompt_text=text + "<prompt>", completion=text,
                             result=res, reward=0.0))
    store.add_rollouts(gid, rolls)
    back = store.rollouts(gid)
    assert [r.completion for r in back] == HOSTILE
    assert [r.prompt for r in back] == [t + "<prompt>" for t in HOSTILE]
    assert [r.trace for r in back] == HOSTILE
    assert [r.stages[0]["trace"] for r in back] == HOSTILE  # JSON columns keep them too

    call = store.record_lm_call("reflection", "m", {"messages": HOSTILE}, {"text": HOSTILE[0]}, error=HOSTILE[2],
                                generation_id=gid)
    from evolve.util.hashing import content_hash

    found = store.find_lm_call(content_hash({"messages": HOSTILE}), include_failed=True)
    assert found.id == call and found.request == {"messages": HOSTILE} and found.error == HOSTILE[2]
    pv = store.put_prompt_version({"system": HOSTILE[0], "lessons": HOSTILE[3]})
    assert store.get_prompt_version(pv).components == {"system": HOSTILE[0], "lessons": HOSTILE[3]}

    gid2 = store.begin_generation("r", None, {})
    store.fail_generation(gid2, HOSTILE[1])
    assert store.get_generation(gid2).error == HOSTILE[1]


def test_terminal_shows_control_characters_escaped():
    for text in HOSTILE:
        shown = terminal_safe(text)
        assert all(c in "\n\t" or (c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF) for c in shown), repr(shown)
        shown.encode("utf-8")  # always encodable
    assert terminal_safe("a\x00b\x1b[31m") == "a\\x00b\\x1b[31m"
    assert terminal_safe("x\udcffy") == "x\\udcffy"
    assert terminal_safe("line\n\tkept") == "line\n\tkept"
