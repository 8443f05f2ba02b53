"""Pipeline stages: compile -> visible tests -> hidden tests -> lint -> perf. One file each."""

from evolve.verification.stages.base import Stage, StageContext, make_stage

__all__ = ["Stage", "StageContext", "make_stage"]
