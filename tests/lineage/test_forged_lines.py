"""Issue #24: what `evolve lineage` and `evolve show` print of model text is one line per field.
An error or an LM reply that holds newlines, carriage returns or terminal escapes cannot put a line
of its own (a forged summary) into the output, at any console width."""

from __future__ import annotations

from lineage_helpers import build_fork_merge

FORGED = "999 passed, 0 failed"
HOSTILE = (f"ValueError: bad\x1b[2K\x1b[1G{FORGED}{' ' * 70}{FORGED}\n{FORGED}\r{FORGED}\x0b{FORGED}\u2028{FORGED}"
           f"\x1b[2K\x1b[1G{FORGED}\udcff")


def _clean(out: str) -> None:
    for line in out.splitlines():
        assert not line.lstrip(" │|*").startswith(FORGED), repr(line)
    assert "\x1b" not in out and "\r" not in out and "\udcff" not in out


def test_a_failed_generations_error_cannot_forge_a_line(store, db_url, tmp_path, cli):
    build_fork_merge(store, tmp_path)
    gid = store.begin_generation("demo", None, {})
    store.fail_generation(gid, HOSTILE, phase="update")
    name = f"demo:{store.get_generation(gid).index}"
    for args in (("lineage", "demo"), ("show", name)):
        r = cli(*args, "--db", db_url)
        assert r.code == 0, r.err
        assert "error in update: ValueError: bad" in r.out, r.out
        _clean(r.out)


def test_an_lm_reply_shown_with_its_prompt_version_cannot_forge_a_line(store, db_url, tmp_path, cli):
    build_fork_merge(store, tmp_path)
    lc = store.record_lm_call("reflector", "offline", {"messages": [{"role": "user", "content": HOSTILE}]},
                              {"text": HOSTILE}, error=HOSTILE)
    pv = store.put_prompt_version({"system": "Write Python.", "lessons": "- forged"}, proposed_by="reflection",
                                  lm_call_ids=[lc])
    r = cli("show", pv[:12], "--db", db_url)
    assert r.code == 0, r.err
    assert "response: " in r.out and "ValueError: bad" in r.out, r.out
    _clean(r.out)
