"""Chat renderings of the suites, for pre-trained chat models (SmolLM2, Qwen, ...).

The tiny model was trained on the raw gym prompt (spec line, ``def`` line, examples) as its user
message. A chat model reads a question better: the user message here says what to write, shows
the signature and the examples, and names the function. The rendering is stored on the task as
``meta["chat_user"]`` (so it is part of the task's content hash and recorded with the run);
``task.prompt`` itself is unchanged, because the verifier reads imports and helper functions from
it (HumanEval). ``render_messages`` uses ``chat_user`` when present.

HumanEval gets a fixed, seeded train/held-out split (``humaneval_split``); the loop records the
held-out ids in the run config.

Suites: ``tiny-coder-chat`` and ``humaneval-chat`` (see ``load_chat_suite``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from evolve.errors import ConfigError
from evolve.verification.types import Task

CHAT_SUITES = ("tiny-coder-chat", "humaneval-chat")


def tiny_coder_user(task: Task) -> str:
    """Spec, signature and examples of a gym task, as a question to a chat model."""
    lines = task.prompt.splitlines()
    spec = lines[0].strip()
    signature = next((ln for ln in lines if ln.startswith("def ")), f"def {task.entry_point}(...):")
    examples = [ln for ln in lines[1:] if ln.startswith(f"{task.entry_point}(")]
    out = [f"Write a Python function `{task.entry_point}`. {spec}", "", "Signature:", signature]
    if examples:
        out += ["", "Examples:", *examples]
    return "\n".join(out)


def humaneval_user(task: Task) -> str:
    """The HumanEval prompt (imports, signature, docstring) as a completion request."""
    return (f"Complete the Python function `{task.entry_point}` below.\n\n```python\n"
            f"{task.prompt.rstrip()}\n```")


def with_chat_rendering(task: Task) -> Task:
    user = humaneval_user(task) if task.check_code is not None else tiny_coder_user(task)
    return dataclasses.replace(task, meta={**task.meta, "chat_user": user, "reply_format": "chat"})


def humaneval_split(seed: int, heldout_fraction: float) -> tuple[list[str], list[str]]:
    """(train ids, held-out ids) of the 164 problems: a seeded permutation, ids sorted in each part."""
    from evolve.verification import load_humaneval

    if not 0 < heldout_fraction < 1:
        raise ConfigError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    ids = [t.task_id for t in load_humaneval()]
    order = np.random.default_rng(seed).permutation(len(ids))
    cut = int(round(len(ids) * heldout_fraction))
    held = sorted((ids[i] for i in order[:cut]), key=_he_num)
    train = sorted((ids[i] for i in order[cut:]), key=_he_num)
    return train, held


def _he_num(task_id: str) -> int:
    return int(task_id.rsplit("/", 1)[1])


def _gym_parts(split_seed: int, heldout_fraction: float) -> dict[str, list[Task]]:
    from evolve.gym import load_gym

    return {"train": load_gym("train", seed=0), "heldout": load_gym("heldout", seed=0)}


def _humaneval_parts(split_seed: int, heldout_fraction: float) -> dict[str, list[Task]]:
    from evolve.verification import load_humaneval

    by_id = {t.task_id: t for t in load_humaneval()}
    train, held = humaneval_split(split_seed, heldout_fraction)
    return {"train": [by_id[i] for i in train], "heldout": [by_id[i] for i in held]}


_PARTS = {"tiny-coder-chat": _gym_parts, "humaneval-chat": _humaneval_parts}


def load_chat_suite(name: str, split_seed: int = 0, heldout_fraction: float = 0.25) -> dict[str, list[Task]]:
    """{"train": [...], "heldout": [...]} with the chat rendering applied."""
    if name not in _PARTS:
        raise ConfigError(f"unknown chat suite {name!r} (known: {', '.join(CHAT_SUITES)})")
    parts = _PARTS[name](split_seed, heldout_fraction)
    return {k: [with_chat_rendering(t) for t in v] for k, v in parts.items()}
