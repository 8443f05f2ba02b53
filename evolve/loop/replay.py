"""Replay: re-run a committed generation from its parent's stored state, with its recorded seeds
and LM calls (failed calls fail again), and compare everything it produced with the record:
the prompt hash, the weights sha256, every rollout (completion, reward, verdict) and every metric
but wall-clock timings. The report names the first difference it finds.

Generation 0 has no parent: its replay rebuilds the run's initial state and recomputes its
held-out evaluation. A generation that did not update the weights (prompt mode, or a frozen
backend) says so instead of claiming a weights match that nothing recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evolve.loop import fingerprint as fp
from evolve.loop.config import GenerationSeeds, LoopConfig
from evolve.loop.controller import run_generation
from evolve.loop.recording import replay_recorder
from evolve.loop.runner import build_session, check_recorded_tasks, initial_outcome, session_from_generation
from evolve.metrics import GenerationMetrics, HeldoutMetrics
from evolve.util.repro import seed_everything


@dataclass
class ReplayReport:
    generation: str
    recorded_prompt: str
    replayed_prompt: str
    recorded_weights: str | None
    replayed_weights: str
    recorded_heldout: float | None
    replayed_heldout: float | None
    n_rollouts: int = 0
    rollouts_equal: bool = False
    metrics_equal: bool = False
    first_difference: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def prompt_equal(self) -> bool:
        return self.recorded_prompt == self.replayed_prompt

    @property
    def weights_equal(self) -> bool:
        return self.recorded_weights == self.replayed_weights

    @property
    def ok(self) -> bool:
        return self.prompt_equal and self.weights_equal and self.rollouts_equal and self.metrics_equal

    def to_dict(self) -> dict:
        return {**self.__dict__, "prompt_equal": self.prompt_equal, "weights_equal": self.weights_equal,
                "ok": self.ok}


def compare(report: ReplayReport, store, gen, out) -> ReplayReport:
    """Fill in the rollout and metric comparison, and the first difference of all."""
    recorded = [fp.rollout_row(r) for r in store.rollouts(gen.id)]
    replayed = [fp.rollout_row(r) for r in out.rollouts]
    rollout_diff = fp.first_rollout_difference(recorded, replayed)
    metric_diff = fp.first_metric_difference(gen.metrics or {}, out.metrics)
    report.n_rollouts = len(recorded)
    report.rollouts_equal, report.metrics_equal = rollout_diff is None, metric_diff is None
    if not report.prompt_equal:
        report.first_difference = f"prompt: recorded {report.recorded_prompt[:16]} replayed {report.replayed_prompt[:16]}"
    else:
        report.first_difference = rollout_diff or metric_diff
        if report.first_difference is None and not report.weights_equal:
            report.first_difference = (f"weights: recorded {str(report.recorded_weights)[:16]} "
                                       f"replayed {report.replayed_weights[:16]}")
    return report


def replay_generation(store, ref: str, say=lambda s: None) -> ReplayReport:
    gen = store.resolve_generation(ref)
    run_row = store.get_run(store.generation_name(gen).rsplit(":", 1)[0])
    name = f"{run_row.name}:{gen.index}"
    recorded_weights = store.get_weights_version(gen.weights_version).weights_sha256
    recorder = replay_recorder(store, gen.id)
    if gen.parent_id is None:  # generation 0: rebuild the initial state from the run's config
        cfg = LoopConfig.from_recorded(run_row.config["loop"], source=f"run {run_row.name}",
                                      recorded_by=run_row.code_version)
        check_recorded_tasks(run_row.name, run_row.config, cfg)
        seed_everything(cfg.seed)
        session = build_session(store, run_row.name, cfg, run_row.config["policy_spec"],
                                run_row.config["seed_prompt"], None, None, recorder, say)
        try:
            out = initial_outcome(session.ctx, GenerationSeeds(**gen.seeds))
            report = ReplayReport(name, gen.prompt_version, session.ctx.evolver.current().id, recorded_weights,
                                  session.ctx.policy.weights_hash(), _heldout(gen.metrics), _heldout(out.metrics))
            report.notes.append("generation 0 has no parent: nothing was trained or reflected; its initial "
                                "state was rebuilt from the run's config and its held-out evaluation recomputed")
            return compare(report, store, gen, out)
        finally:
            session.close()
    parent = store.resolve_generation(str(gen.parent_id))
    session, state, tmp = session_from_generation(store, run_row, parent, say, recorder=recorder)
    try:
        seeds = GenerationSeeds(**gen.seeds)
        seed_everything(seeds.sample)
        out = run_generation(session.ctx, state, gen.index, seeds, parent.weights_version,
                             (parent.metrics or {}).get("heldout"))
        report = ReplayReport(name, gen.prompt_version, session.ctx.evolver.current().id, recorded_weights,
                              session.ctx.policy.weights_hash(), _heldout(gen.metrics), _heldout(out.metrics))
        if out.update_stats is None:
            report.notes.append("the weights were not updated in this generation: their equality is the "
                                "parent's checkpoint loaded back, nothing was recomputed")
        if not session.ctx.learn_prompt:
            report.notes.append("prompt evolution was off in this generation: the prompt is the parent's")
        return compare(report, store, gen, out)
    finally:
        session.close()
        tmp.cleanup()


def _heldout(metrics: GenerationMetrics | None) -> float | None:
    return (metrics or GenerationMetrics()).get("heldout", HeldoutMetrics()).get("pass@1")
