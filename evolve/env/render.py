"""How a prompt candidate's components become the first chat messages of a task.

The default rendering of every built-in environment; ``evolve.prompt.candidate`` re-exports it.
It lives here, below prompt and policy, so the episode path can render without importing either.
"""

from __future__ import annotations

from evolve.verification.types import Task

# Rendering order of the known components into the system message.
COMPONENT_ORDER = ("system", "lessons", "demos")


def system_text(components: dict[str, str]) -> str:
    ordered = [k for k in COMPONENT_ORDER if k in components]
    ordered += sorted(k for k in components if k not in COMPONENT_ORDER)
    return "\n".join(components[k].strip() for k in ordered if components[k].strip())


def render_messages(components: dict[str, str], task: Task) -> list[dict]:
    """The chat messages a policy is given for ``task`` under a prompt candidate."""
    messages = []
    system = system_text(components)
    if system:
        messages.append({"role": "system", "content": system})
    # A chat rendering of the task (evolve.gym.chat) when the suite has one; else the raw prompt.
    messages.append({"role": "user", "content": task.meta.get("chat_user") or task.prompt})
    return messages
