"""sampling.seed_scope = "task": each task's samples come from a stream keyed by (seed, the task's index in
the whole batch), so a batch split into shards (each told where it starts) gives exactly the samples of
one call; the default "batch" keeps one stream per call, so there the split changes the samples."""

from __future__ import annotations

from evolve.gym import load_gym
from evolve.policy import PolicySpec, load_policy
from evolve.prompt.candidate import render_messages


def _texts(groups):
    return [[(s.text, s.completion_ids) for s in g] for g in groups]


def _backend_and_prompts(policy: str, scope: str, n: int):
    spec = PolicySpec.from_toml(policy)
    assert spec.sampling.seed_scope == scope
    prompts = [render_messages({"system": "Write f."}, t) for t in load_gym("train", seed=0, n=n)]
    return load_policy(spec).backend, prompts


def test_task_streams_do_not_depend_on_the_split(tiny_model_dir):
    backend, prompts = _backend_and_prompts("policies/tiny-coder-ci-task.toml", "task", 5)
    whole = _texts(backend.generate(prompts, 3, 11))
    split = _texts(backend.generate(prompts[:2], 3, 11)) + _texts(backend.generate(prompts[2:], 3, 11, first_task=2))
    assert split == whole
    assert _texts(backend.generate(prompts[2:], 3, 11)) != whole[2:]  # the start index is part of the key
    assert _texts(backend.generate(prompts, 3, 12)) != whole


def test_batch_scope_is_one_stream(tiny_model_dir):
    backend, prompts = _backend_and_prompts("policies/tiny-coder-ci.toml", "batch", 4)
    whole = _texts(backend.generate(prompts, 3, 11))
    assert _texts(backend.generate(prompts, 3, 11)) == whole
    assert _texts(backend.generate(prompts[2:], 3, 11, first_task=2)) != whole[2:]
