"""Guided retries: guidance from real verdicts, the leakage audit, and training as if unguided.

Real parts: tiny-coder held-out tasks, the default verification pipeline in the sandbox, the CI
tiny model's tokenizer and the real weight update.
"""

from __future__ import annotations

import pytest

from evolve.gym import load_gym
from evolve.loop.guided import (
    Guidance,
    as_unguided,
    build_guidance,
    failed_groups,
    guided_messages,
    leakage_audit,
    leaked_fragments,
    observation_hash,
    retry_group,
)
from evolve.policy.advantages import get_estimator
from evolve.policy.turns import assign_group
from evolve.rollout import Rollout, Turn
from evolve.verification import Verifier

WRONG = [
    "def f(xs, k):\n    return []\n",  # wrong answers on the visible tests
    "def f(xs, k):\n    return xs[0] // 0\n",  # an exception on every call
    "def f(xs, k)\n    return xs\n",  # a syntax error
    "def f(xs, k):\n    return sorted(xs)[::-1]\n",
]


@pytest.fixture(scope="module")
def failed_tasks():
    """Held-out tasks with two arguments (xs, k), each with four real failing verdicts."""
    tasks = [t for t in load_gym("heldout", 0, 40) if t.prompt.splitlines()[1].startswith("def f(xs, k)")][:4]
    assert len(tasks) == 4
    with Verifier(None, jobs=1) as v:
        out = []
        for t in tasks:
            results = v.verify_batch([(t, code) for code in WRONG])
            group = [_rollout(t.task_id, i, code, res) for i, (code, res) in enumerate(zip(WRONG, results, strict=True))]
            out.append((t, group))
    return out


def _rollout(task_id, i, code, result=None, reward=None, turns=None) -> Rollout:
    r = Rollout(task_id=task_id, group=0, sample_index=i, prompt_version="p", weights_version="w",
                messages=[{"role": "user", "content": "task"}], prompt_text="", completion=code, result=result,
                turns=turns or [])
    r.reward = float(result.reward) if reward is None and result is not None else float(reward or 0.0)
    return r


def test_failed_groups_are_those_with_no_pass(failed_tasks):
    groups = [g for _, g in failed_tasks]
    assert failed_groups(groups) == groups
    passing = [_rollout("x", 0, "", None, 1.0)]
    passing[0].result = type(failed_tasks[0][1][0].result)("x", 1.0, True)
    assert failed_groups([passing, groups[0]]) == [groups[0]]


def test_clean_guidance_from_real_verdicts_is_not_flagged(failed_tasks):
    records = []
    for task, group in failed_tasks:
        assert any(s.name == "hidden" and s.failures for r in group for s in r.result.stages)  # hidden data is there
        g = build_guidance(["errors", "visible_diff", "lessons"], group, ["Handle the empty list first."])
        assert g.sources == ["errors", "visible_diff", "lessons"]
        assert "ZeroDivisionError" in g.text and "SyntaxError" in g.text  # errors of the attempts
        visible = task.visible_tests[0]
        assert f"f({visible.inputs[0]!r}, {visible.inputs[1]!r})" in g.text  # the visible diff is there
        records.append((task, g.text))
    audit = leakage_audit(records, heldout_pass1_unguided=0.25, guided_pass1=0.5)
    assert audit["flagged"] == 0 and not audit["leak"] and audit["guidance_texts"] == 4
    assert audit["heldout_pass1_unguided"] == 0.25 and audit["guided_pass1"] == 0.5


def test_planted_leak_is_flagged(failed_tasks):
    records = []
    for task, group in failed_tasks:
        hidden = max(task.hidden_tests, key=lambda t: len(repr(t.inputs)))
        call = f"f({hidden.inputs[0]!r}, {hidden.inputs[1]!r})"
        lesson = f"Remember that {call} must give {hidden.expected!r}."  # a reflector quoting a hidden test
        g = build_guidance(["visible_diff", "lessons"], group, [lesson])
        assert leaked_fragments(g.text, task), g.text
        records.append((task, g.text))
    audit = leakage_audit(records, heldout_pass1_unguided=0.1, guided_pass1=0.9)
    assert audit["flagged"] == 4 and audit["leak"]
    # An expected value alone, in other words, is caught as well when it is distinctive.
    task = failed_tasks[0][0]
    long_expected = max(task.hidden_tests, key=lambda t: len(repr(t.expected)))
    if len(repr(long_expected.expected).replace(" ", "")) >= 6:
        assert leaked_fragments(f"the answer is {long_expected.expected}", task)


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError, match="unknown guidance source"):
        build_guidance(["answers"], [])


def test_guided_retry_is_trained_under_the_unguided_prompt(tiny_model_dir):
    from transformers import AutoTokenizer

    from evolve.policy.chat import encode_prompt

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    unguided = [{"role": "system", "content": "Write Python."}, {"role": "user", "content": "sum of xs"}]
    guidance = Guidance("Examples earlier attempts got wrong:\n- f([1]) returned 0, expected 1", ["visible_diff"])
    guided = guided_messages(unguided, guidance)
    assert guided[1]["content"].endswith(guidance.text) and unguided[1]["content"] == "sum of xs"
    g_text, g_ids = encode_prompt(tok, guided)
    u_text, u_ids = encode_prompt(tok, unguided)
    turns = [Turn("assistant", "def f(xs): return 0", observation_hash=observation_hash(guided), token_span=(0, 3)),
             Turn("user", "f([1]) failed"),
             Turn("assistant", "def f(xs): return sum(xs)", observation_hash="x", token_span=(5, 8))]
    retry = Rollout(task_id="t", group=0, sample_index=0, prompt_version="p", weights_version="w", messages=guided,
                    prompt_text=g_text, completion="def f(xs): return sum(xs)", reward=1.0, prompt_ids=list(g_ids),
                    completion_ids=list(range(10, 18)), completion_mask=[1, 1, 1, 0, 0, 1, 1, 1], turns=turns)
    copy = as_unguided(retry, unguided, u_text, u_ids, guidance.sources)
    assert copy.prompt_ids == list(u_ids) and copy.messages == unguided and copy.guidance == ["visible_diff"]
    assert "earlier attempts" not in tok.decode(copy.prompt_ids)  # no guidance token is ever trained on
    assert copy.completion_ids == retry.completion_ids and copy.completion_mask == retry.completion_mask
    # Anchors are those of the unguided conversation: an unguided attempt's first turn shares it.
    assert copy.turns[0].observation_hash == observation_hash(unguided)
    conv2 = unguided + [{"role": "assistant", "content": turns[0].content}, {"role": "user", "content": "f([1]) failed"}]
    assert copy.turns[2].observation_hash == observation_hash(conv2) and copy.turns[1].observation_hash is None
    assert retry.messages == guided and retry.turns[0].observation_hash == observation_hash(guided)  # original kept

    # The failed group joined by the retry has signal; the retry's advantage is positive.
    failed = [_rollout("t", i, "def f(xs): return 0", reward=0.0,
                       turns=[Turn("assistant", "def f(xs): return 0", observation_hash=observation_hash(unguided))])
              for i in range(3)]
    group = retry_group(failed, [copy])
    assert [r.sample_index for r in group] == [0, 1, 2, 3]
    assign_group(group, get_estimator("gigpo"))
    assert group[3].advantage > 0 > group[0].advantage
    assert group[3].turns[0].advantage > group[0].turns[0].advantage  # same anchor state, better outcome


def test_guided_retries_config_is_validated():
    from evolve.errors import ConfigError
    from evolve.loop.config import LoopConfig

    for selection in ({"type": "in_group"}, {"type": "gate"}):  # guided retries work under either rule
        cfg = LoopConfig.from_dict({"guided_retries": ["errors", "lessons"], "guided_samples": 2,
                                    "selection": selection})
        assert cfg.guided_retries == ("errors", "lessons")
    with pytest.raises(ConfigError, match="guided_retries.0: Input should be .errors., .visible_diff."):
        LoopConfig.from_dict({"guided_retries": ["hidden_tests"]})
    with pytest.raises(ConfigError, match="guided_samples: Input should be greater than or equal to 1"):
        LoopConfig.from_dict({"guided_retries": ["errors"], "guided_samples": 0})
