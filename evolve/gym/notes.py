"""Teacher bug modes and the instruction lines ("notes") that switch them off.

The imperfect teacher (``evolve.gym.teacher``) injects each applicable bug mode at
its own rate unless the mode's note is among the system-message lines; then it
never makes that bug. Distractor lines look like advice and change nothing. The
reflector of prompt evolution is never told which lines help: it has to measure.
"""

from __future__ import annotations

EMPTY = "EMPTY"  # missing empty-input guard (max/min/mean/first/last of nothing)
DIV = "DIV"  # `/` where `//` is required (float where an int is expected)
CMP = "CMP"  # strict comparison where the spec includes the boundary (`>` for "at least")
OFF1 = "OFF1"  # off-by-one range: misses the last number or the last adjacent pair

BUG_MODES: tuple[str, ...] = (EMPTY, DIV, CMP, OFF1)

NOTES: dict[str, str] = {
    EMPTY: "Handle the empty list.",
    DIV: "Use // for integer division.",
    CMP: "Include the boundary value k.",
    OFF1: "Mind range bounds: include the last one.",
}

# Plausible advice that the teacher ignores: a prompt optimiser should learn they do nothing.
DISTRACTORS: tuple[str, ...] = (
    "Use clear variable names.",
    "Keep the code short.",
    "Think step by step.",
)

SEED_INSTRUCTION = "Write a Python function that solves the task."

ALL_LINES: tuple[str, ...] = (SEED_INSTRUCTION, *NOTES.values(), *DISTRACTORS)


def modes_switched_off(system_text: str) -> frozenset[str]:
    """The bug modes whose note appears (as a whole line) in a system message."""
    lines = {ln.strip() for ln in (system_text or "").splitlines()}
    return frozenset(m for m, note in NOTES.items() if note in lines)
