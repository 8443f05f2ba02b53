"""Shared by the repo-fix tests that drive the episode path with a scripted policy."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ScriptedSample:
    """What a policy's ``generate`` returns per sample; a scripted policy fills in only the text."""

    text: str
    prompt_text: str = ""
    prompt_ids: list = field(default_factory=list)
    completion_ids: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    truncated: bool = False
