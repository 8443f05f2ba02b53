"""Pipeline stages: compile -> visible tests -> hidden tests -> lint -> perf. One file each.

Each stage module registers its factory in ``base.STAGES`` when imported; importing this package
imports them all (a new stage: one new file, plus its name in the import line below).
"""

from evolve.verification.stages import compile, lint, perf, tests  # noqa: F401 - they register themselves
from evolve.verification.stages.base import STAGES, Stage, StageContext, make_stage, register

__all__ = ["STAGES", "Stage", "StageContext", "make_stage", "register"]
