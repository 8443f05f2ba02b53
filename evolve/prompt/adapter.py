"""gepa integration: ``EvolveGEPAAdapter`` over our policy, verifier and reflectors, and
``optimize_prompt`` (a standalone GEPA run through ``gepa.optimize``).

The adapter evaluates a candidate by rolling out the policy with the candidate's system
message and verifying every sample with our verifier; it builds the reflective dataset
with our bounded builder and proposes with our reflector (offline, litellm, or replay).
Every rollout it makes is a :class:`~evolve.rollout.Rollout` with purpose "candidate",
handed to ``rollout_sink`` so the weight update can reuse it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from gepa import GEPAAdapter
from gepa.core.adapter import EvaluationBatch

from evolve.env.base import Environment
from evolve.env.episode import run_episodes
from evolve.env.suites import SuiteEnv
from evolve.prompt.candidate import Candidate
from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.recorder import LMRecorder
from evolve.prompt.reflect import Reflector, make_reflector
from evolve.prompt.reflective_dataset import ReflectiveDataset, build_reflective_dataset
from evolve.rollout import Rollout
from evolve.util.hashing import content_hash
from evolve.verification.types import Task


def roll_out_candidate(policy: Any, verifier: Any, candidate: Candidate, tasks: list[Task], n: int, seed: int,
                       weights_version: str = "", purpose: str = "candidate",
                       env: Environment | None = None) -> list[list[Rollout]]:
    """``n`` verified episodes per task under ``candidate`` (one list per task, in task order),
    through the one episode path; ``env`` defaults to single-turn with the plain rendering."""
    env = env or SuiteEnv("tasks", lambda: {"train": tasks})
    return run_episodes(env, policy, verifier, candidate, tasks, n, seed, purpose, weights_version)


class EvolveGEPAAdapter(GEPAAdapter):
    """A ``gepa.GEPAAdapter`` (subclassed: gepa calls ``propose_new_texts`` on it) over our parts.

    Score of a task = mean reward of its ``samples_per_task`` samples (several samples smooth noise).
    Samples use a seed derived from (seed, task ids), so a parent and its child are compared on
    common random numbers.
    """

    def __init__(self, policy: Any, verifier: Any, reflector: Reflector, config: PromptEvolutionConfig,
                 samples_per_task: int = 1, seed: int = 0, weights_version: str = "",
                 rollout_sink: Callable[[list[Rollout]], None] | None = None) -> None:
        self.policy, self.verifier, self.reflector, self.config = policy, verifier, reflector, config
        self.samples_per_task, self.seed, self.weights_version = samples_per_task, seed, weights_version
        self.rollout_sink = rollout_sink
        self.rng = random.Random(seed)
        self.lm_call_ids: dict[str, list[int]] = {}  # candidate id -> reflection calls that produced it
        self._datasets: dict[str, ReflectiveDataset] = {}

    def evaluate(self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False):
        cand = Candidate(dict(candidate))
        seed = int(content_hash([self.seed, [t.task_id for t in batch]])[:8], 16)
        groups = roll_out_candidate(self.policy, self.verifier, cand, batch, self.samples_per_task, seed,
                                    self.weights_version)
        if self.rollout_sink is not None:
            self.rollout_sink([r for g in groups for r in g])
        scores = [sum(r.reward for r in g) / len(g) for g in groups]
        return EvaluationBatch(outputs=[[r.completion for r in g] for g in groups], scores=scores,
                               trajectories=groups if capture_traces else None,
                               num_metric_calls=len(batch) * self.samples_per_task)

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        rollouts = [r for g in (eval_batch.trajectories or []) for r in g]
        ds = build_reflective_dataset(rollouts, self.config, self.rng)
        self._datasets[Candidate(dict(candidate)).id] = ds
        # gepa wants records per component; every component sees the same bounded records.
        return {c: [dict(r) for r in ds.records] or [{"feedback": "no rollouts"}] for c in components_to_update}

    def propose_new_texts(self, candidate, reflective_dataset, components_to_update):
        parent = Candidate(dict(candidate))
        ds = self._datasets.pop(parent.id, None) or ReflectiveDataset()
        drafts = self.reflector.reflect(parent, ds, self.rng, 1)
        for d in drafts:
            if d.components is None:
                continue
            changed = {k: v for k, v in d.components.items() if k in candidate and candidate[k] != v}
            if changed:
                self.lm_call_ids[Candidate({**candidate, **changed}).id] = d.lm_call_ids
                return changed
        return {}  # gepa skips a proposal with no text updates


def optimize_prompt(seed_candidate: Candidate, trainset: list[Task], valset: list[Task], policy: Any,
                    verifier: Any, config: PromptEvolutionConfig | None = None, recorder: LMRecorder | None = None,
                    max_metric_calls: int = 200, samples_per_task: int = 1, minibatch_tasks: int = 3,
                    seed: int = 0, run_dir: str | None = None,
                    rollout_sink: Callable[[list[Rollout]], None] | None = None) -> tuple[Candidate, Any]:
    """A standalone GEPA run (gepa.optimize) with our reflector; returns (best candidate, GEPAResult).

    The seed is padded with every component in ``config.components`` (empty text renders nothing)
    because gepa only updates components that already exist in the candidate.
    """
    import gepa

    config = config or PromptEvolutionConfig()
    reflector = make_reflector(config, recorder)
    adapter = EvolveGEPAAdapter(policy, verifier, reflector, config, samples_per_task, seed,
                                rollout_sink=rollout_sink)
    comps = {**{c: "" for c in config.components}, **seed_candidate.components}
    result = gepa.optimize(
        seed_candidate=comps, trainset=trainset, valset=valset, adapter=adapter,
        candidate_selection_strategy="pareto", frontier_type="instance", reflection_minibatch_size=minibatch_tasks,
        use_merge=config.use_merge, max_merge_invocations=config.max_merges, max_metric_calls=max_metric_calls,
        max_reflection_cost=config.max_lm_cost_usd, perfect_score=1.0, skip_perfect_score=True,
        run_dir=run_dir, seed=seed, display_progress_bar=False, raise_on_exception=True,
        logger=_QuietLogger())
    return Candidate(dict(result.best_candidate)), result


class _QuietLogger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(str(message))
