"""Runs, resumes, forks and replays generations, and commits each one atomically.

A generation is committed in this order: state artifacts (each blob durable),
weights version, LM calls, prompt versions, rollouts, then the status flip in
one transaction. A kill at any point leaves a *pending* generation that the
next ``resume`` discards, never a half-visible one.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evolve.errors import EvolveError
from evolve.loop.config import GenerationSeeds, LoopConfig
from evolve.loop.controller import LoopContext, Outcome, full_heldout, run_generation
from evolve.loop.recording import BufferRecorder
from evolve.loop.rollouts import PENDING_WEIGHTS, heldout_metrics, original_metrics, roll_out, verify
from evolve.loop.state import LoopState, SamplerState, read_state_folder, store_state
from evolve.metrics import GenerationMetrics
from evolve.prompt.candidate import Candidate
from evolve.util.repro import seed_everything

if TYPE_CHECKING:
    from collections.abc import Callable

    from evolve.cluster import ClusterBackend
    from evolve.lineage import LineageStore
    from evolve.policy import PolicySpec
    from evolve.prompt.recorder import LMRecorder


@dataclass
class Session:
    """A process's live objects for one run: store, context and the recorder."""

    store: LineageStore
    run: str
    ctx: LoopContext
    spec: PolicySpec
    recorder: LMRecorder  # a BufferRecorder in a live session (commit flushes it); replay's never commits
    say: Callable[[str], None]  # status lines
    cluster: ClusterBackend | None = None  # where verification and rollouts run (local or ray)

    def close(self) -> None:
        self.ctx.verifier.close()
        if self.cluster is not None:
            self.cluster.close()


# ---- building ----------------------------------------------------------------------------------

def load_seed_prompt(path: str) -> dict[str, str]:
    from evolve.prompt import load_seed_prompt as load

    return dict(load(path).components)


def environment(cfg: LoopConfig):
    """The run's environment: ``suite`` names a registered one, a .py file or a dotted module."""
    from evolve.env import load_environment

    return load_environment(cfg.suite, split_seed=cfg.split_seed, heldout_fraction=cfg.heldout_fraction,
                            max_turns=cfg.max_turns, task_columns=cfg.task_columns)


def load_suite(cfg: LoopConfig, env=None):
    """(train, held-out subset, validation, all held-out) task lists of the configured environment."""
    parts = (env or environment(cfg)).splits()
    train, heldout = parts["train"], parts["heldout"]
    pick = np.random.default_rng(cfg.seed + 101)
    all_heldout = heldout
    heldout = [heldout[i] for i in sorted(pick.permutation(len(heldout))[:cfg.heldout_tasks])]
    n_val = cfg.selection.val_tasks if cfg.selection.type == "gate" else 0  # in-group validates nothing
    val = [train[i] for i in sorted(pick.permutation(len(train))[:n_val])]
    return train, heldout, val, all_heldout


def suite_record(cfg: LoopConfig, env=None) -> dict:
    """What the run config records about the suite: the held-out ids of a seeded split (and, for a
    user's task file or dataset, its tasks' digest: ``task_source``)."""
    return dict(getattr(env or environment(cfg), "record", None) or {})


def check_recorded_tasks(run_name: str, config: dict, cfg: LoopConfig) -> None:
    """A run over a user's task file resumes and replays only on the same tasks: its recorded digest
    must match the file's now (one line saying so otherwise, before anything is loaded). The same
    holds for its verifier version (``check_recorded_version``)."""
    check_recorded_version(run_name, config, cfg)
    recorded = config.get("task_source")
    if not recorded:
        return
    now = suite_record(cfg).get("task_source", {})
    if now.get("sha256") != recorded.get("sha256"):
        raise EvolveError(f"run {run_name}: its tasks {recorded.get('path')} changed since the run was recorded "
                          f"(sha256 {str(recorded.get('sha256'))[:12]}, now {str(now.get('sha256'))[:12]}); "
                          "restore that file to resume or replay it")


def version_config(cfg: LoopConfig) -> dict:
    """What the run config records about its verifier version (``{"verifier_version": {...}}``: the file,
    the version hash, the source verifier's hash, seed, inputs and counts), read and checked against the
    suite's tasks now; {} without one."""
    if not cfg.verifier_version:
        return {}
    train, _heldout, _val, all_heldout = load_suite(cfg)
    return {"verifier_version": with_verifier_version(cfg, (train, all_heldout))[2]}


def check_recorded_version(run_name: str, config: dict, cfg: LoopConfig) -> None:
    """A run that trained with a verifier version resumes and replays only with that version: the file
    its config names must still hold it (the version hash over the added tests)."""
    recorded = config.get("verifier_version")
    if not recorded or not cfg.verifier_version:
        return
    from evolve.verification.augment import read_version

    now = read_version(Path(cfg.verifier_version))["version"]
    if now != recorded.get("version"):
        raise EvolveError(f"run {run_name}: it trained with verifier version {str(recorded.get('version'))[:12]} "
                          f"from {cfg.verifier_version}, which now holds version {now[:12]}; "
                          "restore that file to resume or replay it")


def with_verifier_version(cfg: LoopConfig, parts: tuple[list, ...]) -> tuple[tuple[list, ...], dict, dict]:
    """The task lists with the config's verifier version applied (the same task objects where it adds
    nothing), the original tasks it augments by id, and what the run records about it ({} without one)."""
    if not cfg.verifier_version:
        return parts, {}, {}
    from evolve.verification.augment import versioned_tasks

    every = list({t.task_id: t for part in parts for t in part}.values())
    v = versioned_tasks(Path(cfg.verifier_version), every)
    return tuple([v.tasks.get(t.task_id, t) for t in part] for part in parts), v.originals, v.record


def build_session(store, run: str, cfg: LoopConfig, spec_dict: dict, seed_components: dict,
                  checkpoint_dir: Path | None, prompt_state: dict | None, recorder, say,
                  allow_weak_sandbox: bool = False, cluster=None) -> Session:
    from evolve.cluster import open_cluster
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt import PromptEvolver, make_reflector

    spec = PolicySpec.from_recorded(spec_dict)
    policy = load_policy(spec, checkpoint_dir=checkpoint_dir)
    record_policy_calls(policy, recorder)
    learn_weights = cfg.mode in ("coupled", "weights")
    if learn_weights and not policy.can_update:
        say(f"weights frozen: the {spec.backend} backend cannot be trained; prompt evolution only")
        learn_weights = False
    pconfig = cfg.prompt
    reflector = make_reflector(pconfig, recorder)
    if prompt_state is None:
        evolver = PromptEvolver(pconfig, reflector, Candidate(seed_components))
    else:
        evolver = PromptEvolver.from_state_dict(prompt_state, reflector)
    # Where verification and rollouts run ([cluster]: local process or Ray actors); the loop cannot tell.
    backend = open_cluster(cluster, store, say)
    # The sandbox starts now, so a machine below full isolation stops the run before anything is
    # written: the Verifier refuses (one line naming what is missing) unless weak isolation was asked for.
    verifier = backend.verifier(cfg.pipeline, cfg.verifier_jobs, allow_weak_sandbox)
    backend.attach(policy)
    say(f"verifier isolation: {verifier.isolation}")
    env = environment(cfg)
    verifier = env.wrap_verifier(verifier)  # chat suites take replies apart (fences, entry-point name) first
    # a verifier version: the tasks it augments carry its tests for training and held-out alike
    (train, heldout, val, all_heldout), originals, _record = with_verifier_version(cfg, load_suite(cfg, env))
    by_id = {t.task_id: t for t in train + all_heldout}
    ctx = LoopContext(cfg, policy, verifier, evolver, train, heldout, val, by_id,
                      learn_weights=learn_weights, learn_prompt=cfg.mode in ("coupled", "prompt"),
                      all_heldout_tasks=all_heldout, env=env, original_tasks=originals)
    return Session(store, run, ctx, spec, recorder, say, backend)


def record_policy_calls(policy, recorder) -> None:
    """A policy behind an API (litellm) records every call like a reflection call, so its runs replay."""
    if not hasattr(policy.backend, "call_hook"):
        return
    from evolve.prompt.recorder import recorded_call

    def hook(role, model, request, fetch):
        out = recorded_call(recorder, role, model, request, fetch)
        return out.response, out.error

    policy.backend.call_hook = hook


# ---- committing --------------------------------------------------------------------------------

def commit_outcome(session: Session, gid: int, out: Outcome, parent_weights: str | None) -> tuple[str, str]:
    """Persist one generation; returns (prompt version, weights version)."""
    store, ctx, t0 = session.store, session.ctx, time.perf_counter()
    art = store.artifacts(session.run)
    state_sha, policy_sha = store_state(art, ctx.policy, ctx.evolver.state_dict(), out.loop_state)
    if parent_weights is None or out.update_stats is not None:
        stats = {**(out.update_stats or {}), "weights_sha256": ctx.policy.weights_hash()}
        kind = "adapter" if session.spec.finetune == "lora" else "full"
        wv = store.put_weights_version(policy_sha, parent_weights, session.spec.model, kind=kind,
                                       optimizer_artifact=policy_sha, stats=stats)
    else:
        wv = parent_weights
    ids = session.recorder.flush(store, gid)  # a live session always buffers; replay never commits
    for p in out.proposals:
        prop = p["proposal"]
        store.put_prompt_version(
            prop.candidate.components, parents=list(prop.parents), proposed_by=prop.proposed_by,
            lm_call_ids=[ids[i] for i in prop.lm_call_ids if i in ids],
            meta={**prop.meta, **p.get("meta", {}), "generation": out.index, "accepted": p["accepted"],
                  "minibatch": p["minibatch"], "parent_minibatch": p["parent_minibatch"],
                  "val": p.get("val"), "parent_val": p.get("parent_val")})
    current = ctx.evolver.current()
    pv = store.put_prompt_version(current.components, parents=[], proposed_by="seed" if out.index == 0 else "kept",
                                  lm_call_ids=[], meta={})
    for r in out.rollouts:
        if r.weights_version == PENDING_WEIGHTS:
            r.weights_version = wv
    store.add_rollouts(gid, out.rollouts)
    out.timings["commit"] = time.perf_counter() - t0
    out.metrics["timings"] = dict(out.timings)
    store.commit_generation(gid, pv, wv, state_sha, out.metrics, out.timings)
    return pv, wv


# ---- running -----------------------------------------------------------------------------------

def initial_generation(session: Session) -> tuple[int, str, GenerationMetrics, LoopState]:
    """Generation 0: the seed prompt on the base weights, evaluated on held-out tasks."""
    cfg = session.ctx.config
    seeds = GenerationSeeds.derive(cfg.seed, 0)
    gid = session.store.begin_generation(session.run, None, seeds.to_dict())
    phase = Phase(None, 0, "heldout")
    with failing_marks_failed(session, gid, 0, phase):
        out = initial_outcome(session.ctx, seeds)
        phase("commit")
        _pv, wv = commit_outcome(session, gid, out, None)
    return gid, wv, out.metrics, out.loop_state


class Phase:
    """The phase a generation is in (the controller reports each one), forwarded to the status line."""

    def __init__(self, on_generation, index: int, name: str = "select") -> None:
        self.on_generation, self.index, self.name = on_generation, index, name

    def __call__(self, name: str) -> None:
        self.name = name
        if self.on_generation is not None and name != "commit":
            self.on_generation(self.index, name, None)


@contextmanager
def failing_marks_failed(session: Session, gid: int, index: int, phase: Phase):
    """Errors are data: a generation that raises is marked failed, with its one-line error and the
    phase it died in, and the run stops with that one line (the traceback stays in the record)."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        raise  # an interrupted generation stays pending and is discarded on resume
    except Exception as e:
        line = f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]
        detail = line if isinstance(e, EvolveError) else f"{line}\n{traceback.format_exc()}"
        try:
            session.store.fail_generation(gid, detail, phase=phase.name, summary=line)
        except Exception:  # noqa: BLE001 - the database may be what failed; the line below still says why
            pass
        raise EvolveError(f"generation {session.run}:{index} failed in {phase.name}: {line}") from None


def initial_outcome(ctx: LoopContext, seeds: GenerationSeeds) -> Outcome:
    """What generation 0 computes (replay runs it too): held-out rollouts of the seed prompt."""
    cfg = ctx.config
    seed_everything(cfg.seed)
    prompt = ctx.evolver.current()
    out = Outcome(index=0, seeds=seeds, prompt=prompt, loop_state=LoopState(sampler=SamplerState(seed=cfg.seed)))
    t0 = time.perf_counter()
    rolls = roll_out(ctx, prompt, ctx.heldout_tasks, cfg.heldout_samples, seeds.heldout, "heldout",
                     PENDING_WEIGHTS)
    verify(ctx.verifier, ctx.tasks_by_id, rolls, None)
    out.rollouts = rolls
    heldout = heldout_metrics(rolls, cfg.heldout_ks)
    out.metrics = {"heldout": heldout, "rollouts_spent": 0}
    if ctx.original_tasks:  # a verifier version: the same samples under the tasks' own tests
        out.metrics["heldout_original"] = original_metrics(ctx, rolls, cfg.heldout_ks, heldout)
    if cfg.heldout_final_tasks is not None and cfg.heldout_full_at_start:  # the full figure at the start
        out.metrics["heldout_full"] = full_heldout(ctx, prompt, seeds, out.rollouts)
    out.timings = {"heldout": time.perf_counter() - t0}
    out.loop_state.heldout_history.append(heldout["pass@1"])
    return out


def run_generations(session: Session, parent_gid: int, parent_wv: str, parent_metrics: Mapping[str, Any],
                    state: LoopState, count: int, on_generation=None) -> int:
    """Run ``count`` generations as a chain from ``parent_gid``; returns the last committed id.
    ``parent_metrics``: this process's last generation's, or a stored one's (any run's, recorded by an
    older version too): only its ``heldout`` is read."""
    cfg = session.ctx.config
    for _ in range(count):
        if cfg.max_rollouts is not None and state.rollouts_spent >= cfg.max_rollouts:
            session.say(f"rollout budget spent ({state.rollouts_spent} >= {cfg.max_rollouts}); stopping")
            break
        t_begin = time.perf_counter()
        index = next_index(session.store, session.run)
        seeds = GenerationSeeds.derive(cfg.seed, index)
        gid = session.store.begin_generation(session.run, parent_gid, seeds.to_dict())
        begin_s = time.perf_counter() - t_begin
        if session.store.get_generation(gid).index != index:
            raise EvolveError(f"run {session.run} is being written by another process")
        seed_everything(seeds.sample)
        t0 = time.perf_counter()
        phase = Phase(on_generation, index)
        with failing_marks_failed(session, gid, index, phase):
            out = run_generation(session.ctx, state, index, seeds, parent_wv, parent_metrics.get("heldout"),
                                 progress=phase)
            out.timings["total"] = time.perf_counter() - t0
            out.timings["lineage_begin"] = begin_s  # bookkeeping, like "commit" and the store's "commit_verify"
            phase("commit")
            _pv, wv = commit_outcome(session, gid, out, parent_wv)
        if on_generation:
            on_generation(index, "done", out)
        parent_gid, parent_wv, parent_metrics, state = gid, wv, out.metrics, out.loop_state
    return parent_gid


def next_index(store, run: str) -> int:
    """The index ``begin_generation`` will give (seeds derive from it, so it is known first)."""
    from sqlalchemy import func, select

    from evolve.lineage.models import Generation

    run_id = store.get_run(run).id
    with store.session() as s:
        return s.scalar(select(func.coalesce(func.max(Generation.index) + 1, 0)).where(Generation.run_id == run_id))


def materialize_state(store, run: str, generation) -> tuple[Path, tempfile.TemporaryDirectory]:
    tmp = tempfile.TemporaryDirectory(prefix="evolve-resume-")
    folder = Path(tmp.name) / "state"
    store.artifacts(run).materialize_dir(generation.state_artifact, folder)
    return folder, tmp


def session_from_generation(store, run_row, generation, say, recorder=None,
                            cluster=None) -> tuple[Session, LoopState, tempfile.TemporaryDirectory]:
    """Rebuild the full state of a committed generation (weights, optimizer, sampler, prompts).
    No RNG state is restored: the next generation reseeds from its derived seeds. ``cluster``: where
    to verify and roll out (None = local; replay always runs locally)."""
    if generation.status != "committed":
        raise EvolveError(f"generation {run_row.name}:{generation.index} is {generation.status}, not committed")
    config = run_row.config
    cfg = LoopConfig.from_recorded(config["loop"], source=f"run {run_row.name}", recorded_by=run_row.code_version)
    check_recorded_tasks(run_row.name, config, cfg)
    folder, tmp = materialize_state(store, run_row.name, generation)
    prompt_state, loop_state = read_state_folder(folder)
    session = build_session(store, run_row.name, cfg, config["policy_spec"], config["seed_prompt"],
                            folder / "policy", prompt_state, recorder or BufferRecorder(), say,
                            allow_weak_sandbox=bool(config.get("allow_weak_sandbox")), cluster=cluster)
    return session, loop_state, tmp


def new_run_name(cfg: LoopConfig) -> str:
    if cfg.suite.endswith(".py") or "/" in cfg.suite or Path(cfg.suite).exists():  # a file or folder
        suite = Path(cfg.suite).name.split(".")[0]
    else:  # a name or a dotted module
        suite = cfg.suite.rsplit(".", 1)[-1]
    return f"{suite}-{cfg.mode}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
