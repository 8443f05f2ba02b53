"""Replay: re-run a committed generation from its parent's stored state, with its
recorded seeds and reflection responses, and compare the resulting hashes."""

from __future__ import annotations

from dataclasses import dataclass

from evolve.loop.config import GenerationSeeds
from evolve.loop.controller import run_generation
from evolve.loop.recording import replay_recorder
from evolve.loop.runner import build_session, session_from_generation
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

    @property
    def prompt_equal(self) -> bool:
        return self.recorded_prompt == self.replayed_prompt

    @property
    def weights_equal(self) -> bool:
        return self.recorded_weights == self.replayed_weights

    @property
    def ok(self) -> bool:
        return self.prompt_equal and self.weights_equal

    def to_dict(self) -> dict:
        return {**self.__dict__, "prompt_equal": self.prompt_equal, "weights_equal": self.weights_equal,
                "ok": self.ok}


def replay_generation(store, ref: str, say=lambda s: None) -> ReplayReport:
    gen = store.resolve_generation(ref)
    run_row = store.get_run(store.generation_name(gen).rsplit(":", 1)[0])
    recorded_weights = store.get_weights_version(gen.weights_version).weights_sha256
    recorder = replay_recorder(store)
    if gen.parent_id is None:  # generation 0: rebuild the initial state from the run's config
        from evolve.loop.config import LoopConfig

        cfg = LoopConfig.from_dict(run_row.config["loop"], source=f"run {run_row.name}")
        seed_everything(cfg.seed)
        session = build_session(store, run_row.name, cfg, run_row.config["policy_spec"],
                                run_row.config["seed_prompt"], None, None, recorder, say)
        try:
            return ReplayReport(f"{run_row.name}:{gen.index}", gen.prompt_version, session.ctx.evolver.current().id,
                                recorded_weights, session.ctx.policy.weights_hash(), None, None)
        finally:
            session.close()
    parent = store.resolve_generation(str(gen.parent_id))
    session, state, tmp = session_from_generation(store, run_row, parent, say, recorder=recorder)
    try:
        seeds = GenerationSeeds(**gen.seeds)
        seed_everything(seeds.sample)
        out = run_generation(session.ctx, state, gen.index, seeds, parent.weights_version,
                             (parent.metrics or {}).get("heldout"))
        return ReplayReport(
            f"{run_row.name}:{gen.index}", gen.prompt_version, session.ctx.evolver.current().id,
            recorded_weights, session.ctx.policy.weights_hash(),
            (gen.metrics or {}).get("heldout", {}).get("pass@1"), out.metrics["heldout"]["pass@1"])
    finally:
        session.close()
        tmp.cleanup()
