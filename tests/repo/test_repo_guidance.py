"""Agent-RLVR-style guidance on a failed repo-fix episode: error output + fault location, never
the fix; the leakage audit flags guidance that quotes the injected bug's pristine lines."""

from __future__ import annotations

from types import SimpleNamespace

from evolve.loop.guided import build_guidance, leakage_audit


def test_guidance_names_file_and_function_and_never_the_fix(env):
    task = env.splits()["train"][0]
    msgs = env.first_messages({}, task)
    (res,) = env.wrap_verifier(None).verify_conversations([(task, msgs)])
    assert not res.passed
    g = build_guidance(["errors", "location"], [SimpleNamespace(result=res)])
    assert "location" in g.sources and task.meta["file"] in g.text and task.meta["function"] in g.text
    assert any(n.split("::")[-1] in g.text for n in task.meta["fail_to_pass"])
    audit = leakage_audit([(task, g.text)], heldout_pass1_unguided=0.0)
    assert audit["flagged"] == 0, audit
    fix = task.meta["leak_fragments"][0]
    leaky = leakage_audit([(task, g.text + "\nHint: the line should read " + fix)], heldout_pass1_unguided=0.0)
    assert leaky["leak"] and leaky["flagged"] == 1
