"""DSPy interop: a program's predictors (instructions + demos) as a candidate, and back.

Components are ``<predictor name>.instructions`` (text) and ``<predictor name>.demos``
(a JSON list of demo dicts), so a DSPy user can evolve their own module with this loop
(reflection, Pareto selection, lineage) and write the winner back into the module.
"""

from __future__ import annotations

import json
from typing import Any

from evolve.errors import ConfigError
from evolve.prompt.candidate import Candidate

INSTR, DEMOS = ".instructions", ".demos"


def _demo_dict(demo: Any) -> dict:
    if hasattr(demo, "toDict"):
        return demo.toDict()
    return dict(demo)


def candidate_from_dspy(program: Any) -> Candidate:
    """Read every predictor's instructions and demos (``program.named_predictors()``)."""
    comps: dict[str, str] = {}
    for name, pred in program.named_predictors():
        comps[name + INSTR] = pred.signature.instructions
        demos = [_demo_dict(d) for d in (pred.demos or [])]
        comps[name + DEMOS] = json.dumps(demos, sort_keys=True, ensure_ascii=False, default=str)
    if not comps:
        raise ConfigError("DSPy program has no predictors to evolve")
    return Candidate(comps)


def apply_to_dspy(candidate: Candidate, program: Any) -> Any:
    """Write the candidate's instructions and demos into ``program`` (in place); returns it."""
    import dspy

    preds = dict(program.named_predictors())
    for key, text in candidate.components.items():
        name, _, field = key.rpartition(".")
        if "." + field not in (INSTR, DEMOS):
            continue  # not a DSPy component (e.g. a shared "system" text)
        if name not in preds:
            raise ConfigError(f"candidate component {key!r} names no predictor of the DSPy program")
        pred = preds[name]
        if "." + field == INSTR:
            pred.signature = pred.signature.with_instructions(text)
            continue
        try:
            demos = json.loads(text) if text.strip() else []
        except json.JSONDecodeError as e:
            raise ConfigError(f"candidate component {key!r} is not a JSON list of demos: {e.msg}") from None
        if not isinstance(demos, list) or not all(isinstance(d, dict) for d in demos):
            raise ConfigError(f"candidate component {key!r} must be a JSON list of objects")
        inputs = list(pred.signature.input_fields)
        pred.demos = [dspy.Example(**d).with_inputs(*[k for k in inputs if k in d]) for d in demos]
    return program
