"""The Stage protocol, the context stages read, and the shared trace helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from evolve.verification.types import StageResult, Task, TestCase

if TYPE_CHECKING:
    from evolve.verification.pipeline_types import Pipeline, StageConfig
    from evolve.verification.sandbox_output import Reply

MAX_REPR = 200  # per input / expected / got in a trace
MAX_TRACE = 1000  # a whole stage trace


@dataclass
class StageContext:
    """Everything a stage may read about one sample. Expected values never left this process."""

    task: Task
    completion: str
    program: str
    reply: Reply
    pipeline: Pipeline
    visible: tuple[TestCase, ...]  # tests shown to the model, first in the job's call list
    hidden: tuple[TestCase, ...]  # never shown; expected values stay here
    weak_reason: str = ""  # non-empty: the hidden verdict is the task's own check(), recorded and replayed
    baseline_time_s: float | None = None  # the canonical solution's test time (perf stage)
    gold: dict = field(default_factory=dict)  # strict types: the canonical result per transform test index
    extra: dict = field(default_factory=dict)


class Stage(Protocol):
    """One verification stage. ``run`` returns a StageResult with a score in [0, 1]. A stage with settings
    of its own declares them as a class attribute ``Options`` (a ``ConfigModel``; the keys of its
    ``[[stages]]`` table beside ``name``), which the pipeline loader checks them against; one without
    takes none."""

    name: str

    def applies(self, ctx: StageContext) -> bool:
        """False when the stage has nothing to check (e.g. a task without visible tests)."""
        ...

    def run(self, ctx: StageContext, cfg: StageConfig) -> StageResult: ...


def short(value: object, limit: int = MAX_REPR) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int past the interpreter's 4300-digit str() limit, possibly nested
        text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = MAX_TRACE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_repr(entry: str, inputs: tuple) -> str:
    return clip(f"{entry}({', '.join(short(a, 80) for a in inputs)})", MAX_REPR)


# name -> factory. Each stage module registers itself on import (``STAGES["lint"] = LintStage``);
# the package ``__init__`` imports every stage module once, so a new stage is one new file and this
# module imports no stage.
STAGES: dict[str, Callable[[], Stage]] = {}


def register(name: str, factory: Callable[[], Stage]) -> None:
    if name in STAGES:
        raise ValueError(f"stage {name!r} registered twice")
    STAGES[name] = factory


def make_stage(name: str) -> Stage:
    return STAGES[name]()
