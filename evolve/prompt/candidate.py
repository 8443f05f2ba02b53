"""Prompt candidates: named text components with content-hash identity."""

from __future__ import annotations

from dataclasses import dataclass, field

from evolve.env.render import COMPONENT_ORDER, render_messages, system_text  # noqa: F401 - re-exported
from evolve.util.hashing import content_hash


@dataclass(frozen=True)
class Candidate:
    """A prompt version. ``components`` maps a name ("system", "lessons", "demos") to text."""

    components: dict[str, str] = field(hash=False)

    @property
    def id(self) -> str:
        return content_hash({"components": self.components})

    def with_component(self, name: str, text: str) -> Candidate:
        return Candidate({**self.components, name: text})
