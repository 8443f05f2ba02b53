"""The shape of a generation's metrics: what the loop writes (``evolve.loop``), the lineage stores as
JSON, and the status line, ``evolve report`` and the UI read.

TypedDicts, not dataclasses, on purpose: at run time they are the plain dicts the lineage has always
stored, so the persisted JSON (key order included), replay's metric hashes and every run recorded
before these types existed load and compare as before; mypy checks the keys the code writes and reads.
``total=False`` where a key is present only in some modes or at some generations. Metrics read back
from the lineage are old runs' too: readers keep their ``.get`` defaults for keys a run may lack.

A types-only module beside ``evolve/rollout.py``: it imports nothing from evolve, so every role may use it.
"""

from __future__ import annotations

from typing import Any, TypedDict

# pass@k keys come from ``heldout_ks`` (any k <= heldout_samples); the TypedDict names the default ks
# (1, 4, 8). The loop's headline figure, the status line and the heldout history read pass@1.
PassAtK = TypedDict("PassAtK", {"pass@1": float, "pass@4": float, "pass@8": float}, total=False)


class OriginalMetrics(PassAtK, total=False):
    """Under a verifier version: held-out pass@k under the tasks' own tests (``rollouts.original_metrics``)."""

    gap: dict[str, float]  # pass@k key -> own tests minus augmented
    reverified: int  # failures on augmented tasks verified a second time, on the original task


class HeldoutMetrics(PassAtK, total=False):
    """``heldout``, ``heldout_seed``, ``heldout_full`` (+ ``per_task``, ``original``)."""

    failure_classes: dict[str, int]
    samples: int
    tasks: int
    per_task: dict[str, int]  # heldout_full only: task id -> passing samples
    original: OriginalMetrics  # heldout_full under a verifier version


class ClassAttribution(TypedDict):
    before: int
    after: int
    removed_by_weights: int
    removed_by_prompt: int


class Attribution(TypedDict):
    """Δ held-out pass@1 split between the levers, and per failure class which lever removed how many."""

    delta_weights: float
    delta_prompt: float
    classes: dict[str, ClassAttribution]


class RoutingSummary(TypedDict):
    """``Routing.summary()``: how the batch's groups were routed between the levers."""

    groups: int
    all_fail: int
    mixed: int
    all_pass: int
    zero_variance_fraction: float
    reflection_rollouts: int
    recurring_classes: list[str]
    weight_groups: int
    all_fail_to_weights: bool


class UpdateRecord(TypedDict, total=False):
    """``update``: the weight update's ``UpdateStats`` fields (tests/loop/test_metrics_types.py keeps the
    two in step) plus what the selection rule records beside them (``update_record``)."""

    loss: float
    kl: float
    clip_fraction: float
    grad_norm: float
    mean_advantage_abs: float
    zero_variance_fraction: float
    all_fail_fraction: float
    n_groups: int
    n_trained_groups: int
    n_tokens: int
    lr: float
    logprob_gap: float
    optimizer_steps: int
    seconds: float
    carried_groups: int  # gate and frozen: groups carried from the last generation
    distill_groups: int  # in_group and value: distilled copies (``distill = "seed"``)


class GuidedMetrics(TypedDict, total=False):
    """``guided``: the guided retries' leakage audit (``guided.leakage_audit``) and their counts."""

    heldout_pass1_unguided: float | None  # filled once held-out is measured (never guided)
    guided_pass1: float | None
    guidance_texts: int
    flagged: int
    flagged_tasks: list[dict[str, Any]]
    leak: bool
    groups: int
    retries: int
    rescued_groups: int


class ChallengerRecord(TypedDict, total=False):
    """in_group / value ``challengers``: one sampled challenger's evidence (``Evidence.summary``)."""

    id: str
    kind: str
    added: str
    samples: int
    n: int
    generations: int
    mean_diff: float
    lower: float
    upper: float
    log_wealth: float
    threshold: float
    decision: str
    test: str
    p: float
    p_threshold: float


class PoolEntry(TypedDict):
    id: str
    n: int
    decision: str


class GateRecord(TypedDict):
    """gate ``gate``: one proposal's minibatch and validation means (parent, proposal) and the decision."""

    id: str
    kind: str
    added: str
    minibatch: list[float | None]
    val: list[float | None]
    accepted: bool
    test: dict[str, Any] | None  # the validation sign-flip test (gate_rule.gate_passes) + "promoted"
    skipped: str | None


class Levers(TypedDict):
    weights: bool
    prompt: bool


class SelectionMetrics(TypedDict, total=False):
    """What a prompt-selection rule's ``judge`` records (``Judgement.metrics``)."""

    gate: list[GateRecord]  # gate (and frozen: always empty)
    challengers: list[ChallengerRecord]  # in_group, value
    promoted: str | None
    evicted: list[str]
    pool: list[PoolEntry]


class TrainMetrics(TypedDict, total=False):
    """The training batch's figures (``controller._train_metrics``; every generation after the first)."""

    train_reward: float
    train_pass_rate: float
    all_fail_task_fraction: float
    routing: RoutingSummary
    zero_variance_fraction: float
    update: UpdateRecord | None
    proposals: int
    accepted: int
    rollouts_spent: int
    reused_rollouts: int


class HeldoutPart(TypedDict, total=False):
    """The held-out phase's keys (``controller._evaluate_heldout``)."""

    heldout_original: OriginalMetrics
    heldout: HeldoutMetrics
    prompt_changed: bool
    heldout_seed: HeldoutMetrics
    attribution: Attribution


class FinalHeldout(TypedDict, total=False):
    heldout_full: HeldoutMetrics
    heldout_full_seed: HeldoutMetrics


class FailedRecord(TypedDict):
    phase: str
    error: str


class GenerationMetrics(SelectionMetrics, HeldoutPart, FinalHeldout, TrainMetrics, total=False):
    """One generation's metrics as committed (generation 0: ``heldout``, ``rollouts_spent`` and the
    optional held-out figures); each phase's part is a TypedDict above, merged in by the controller."""

    guided: GuidedMetrics
    levers: Levers
    selection: str | None  # the rule's type; None when the prompt lever is off
    timings: dict[str, float]  # wall-clock bookkeeping (replay leaves it out)
    failed: FailedRecord  # a failed generation (LineageStore.fail_generation)
