"""`evolve eval`: pass@k (unbiased) of a policy spec or a lineage generation on a task suite.

torch, transformers and the verifier are imported inside the command, so `evolve --help` stays fast.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import typer

from evolve.errors import ConfigError

SUITES = ("tiny-coder", "humaneval", "tiny-coder-chat", "humaneval-chat")


def load_suite_tasks(suite: str, split: str, n: int | None, seed: int, split_seed: int = 0,
                     max_turns: int | None = None, heldout_fraction: float = 0.25,
                     task_columns: dict[str, str] | None = None):
    """(tasks, environment): a split of an environment (evolve.env), a user's task file or dataset
    folder included; ``split`` "all" is every split. ``max_turns``: as the loop config's (most policy
    turns per episode; single-turn suites ignore it); None keeps the environment's own default."""
    from evolve.env import load_environment
    from evolve.gym.generate import subset

    env = load_environment(suite, split_seed=split_seed, heldout_fraction=heldout_fraction, task_columns=task_columns,
                           **({} if max_turns is None else {"max_turns": max_turns}))
    parts = env.splits()
    if split == "all":
        tasks = [t for part in parts.values() for t in part]
    elif split in parts:
        tasks = parts[split]
    else:
        raise ConfigError(f"suite {suite!r} has splits {', '.join(parts)} (and all), not {split!r}")
    # The gym's subsets are seeded; HumanEval and a task file keep their order (their first n problems).
    tasks = subset(tasks, n, seed) if suite.startswith("tiny-coder") else tasks[:n]
    return tasks, env


def default_prompt(suite: str) -> dict[str, str]:
    path = Path("prompts") / ("chat-coder.toml" if suite.endswith("-chat") else f"{suite}.toml")
    if not path.exists():
        return {}
    from evolve.prompt.seed import load_seed_prompt

    return dict(load_seed_prompt(path).components)


def _run_split(generation: str | None, db: str | None, suite: str) -> dict:
    """GEN's run's split settings when ``suite`` is what it ran on, so `evolve eval RUN:I --suite FILE`
    evaluates the held-out tasks the run held out; {} otherwise."""
    if generation is None:
        return {}
    from evolve.lineage import LineageStore

    store = LineageStore.open(db, create=False, auto_upgrade=False)
    try:
        gen = store.resolve_generation(generation)
        loop = (store.get_run(store.generation_name(gen).rsplit(":", 1)[0]).config or {}).get("loop", {})
    finally:
        store.close()
    if loop.get("suite") != suite:
        return {}
    return {k: loop[k] for k in ("split_seed", "heldout_fraction", "task_columns") if k in loop}


def _from_generation(ref: str, db: str | None, dest: Path):
    """(spec, checkpoint dir or None, prompt components) of a committed lineage generation."""
    from evolve.lineage import LineageStore
    from evolve.policy import PolicySpec
    from evolve.policy.policy import POLICY_META

    store = LineageStore.open(db, create=False, auto_upgrade=False)
    try:
        gen = store.resolve_generation(ref)
        run = store.generation_name(gen).rsplit(":", 1)[0]
        if gen.status != "committed" or not gen.weights_version:
            raise ConfigError(f"generation {ref} is not committed (status {gen.status})")
        components = dict(store.get_prompt_version(gen.prompt_version).components) if gen.prompt_version else {}
        wv = store.get_weights_version(gen.weights_version)
        if wv.artifact_sha:
            ckpt = store.artifacts(run).materialize_dir(wv.artifact_sha, dest / "policy")
            meta = json.loads((Path(ckpt) / POLICY_META).read_text())
            return PolicySpec.from_recorded(meta["spec"], source=f"{ref} policy spec"), Path(ckpt), components
        config = store.get_run(run).config or {}
        spec_dict = config.get("policy_spec")
        if not spec_dict:
            raise ConfigError(f"generation {ref} has no checkpoint and its run records no policy spec")
        return PolicySpec.from_recorded(spec_dict, source=f"run {run} policy spec"), None, components
    finally:
        store.close()


def eval_cmd(
    ctx: typer.Context,
    generation: str | None = typer.Argument(None, help="A lineage generation RUN:INDEX (or id) to evaluate."),
    policy: Path | None = typer.Option(None, "--policy", help="A policy spec TOML (instead of GEN)."),
    model: str | None = typer.Option(None, "--model", help="A model (local HF folder, .gguf file or hub id) instead "
                                     "of GEN: the --policy spec's settings (default: the built-in defaults) on it."),
    suite: str = typer.Option("tiny-coder", "--suite", help=f"Environment: {', '.join(SUITES)}, any evolve.env name (e.g. tiny-coder-chat-repair), a .py environment, or your own tasks: a .jsonl task file or a dataset folder (save_to_disk)."),
    split: str = typer.Option("heldout", "--split", help="Suite split: train | heldout | all."),
    split_seed: int | None = typer.Option(None, "--split-seed", help="humaneval-chat and your own tasks: the "
                                          "split's seed (as the loop config's split_seed); default: GEN's run's "
                                          "when --suite is its suite, else 0."),
    heldout_fraction: float | None = typer.Option(None, "--heldout-fraction", help="humaneval-chat and your own "
                                                  "tasks: share held out (default: as --split-seed, else 0.25)."),
    columns: str | None = typer.Option(None, "--columns", metavar="FIELD=COLUMN,...",
                                       help="Your own tasks: the column of each task field (e.g. prompt=question); "
                                            "default: as --split-seed, else the field names."),
    samples: int = typer.Option(16, "--samples", min=1, help="Samples per task (n in pass@k)."),
    k: str = typer.Option("1,4,16", "--k", help="Comma-separated k values (those above --samples are dropped)."),
    prompt: Path | None = typer.Option(None, "--prompt", help="Seed-prompt TOML; default: GEN's prompt "
                                       "version, else prompts/<suite>.toml."),
    n_tasks: int | None = typer.Option(None, "--tasks", min=1, help="Evaluate a deterministic subset of tasks."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed (and the gym subset's seed)."),
    jobs: int = typer.Option(2, "--jobs", min=1, help="Verifier worker processes."),
    max_turns: int | None = typer.Option(None, "--max-turns", min=1, help="Most policy turns per episode of a "
                                         "multi-turn environment (<suite>-repair, repo-fix), as the loop config's "
                                         "max_turns; default: the environment's own. Single-turn suites ignore it."),
    pipeline: Path | None = typer.Option(None, "--pipeline", help="Verification pipeline TOML."),
    verifier_version: Path | None = typer.Option(None, "--verifier-version", metavar="FILE",
                                                 help="A verifier version written by `evolve augment`: pass@k "
                                                      "under its augmented tests and under the tasks' own, "
                                                      "with the gap."),
    db: str | None = typer.Option(None, "--db", help="Lineage database (for GEN)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON output."),
) -> None:
    """pass@k with the unbiased estimator, per task and overall."""
    from evolve.loop.run_config import override_spec, parse_overrides
    from evolve.policy.evaluate import evaluate_pass_at_k, parse_ks

    # click hands GEN the first extra word when a dotted one comes first: GEN is the bare word among them
    generation, dotted = parse_overrides([*([generation] if generation else []), *ctx.args])
    if (generation is None) == (policy is None and model is None):
        raise ConfigError("give exactly one of GEN (RUN:INDEX) or --policy SPEC / --model MODEL")
    from evolve.policy import PolicySpec, load_policy

    ks = parse_ks(k, samples)
    spec = PolicySpec.from_toml(policy) if policy is not None else None
    if model is not None:
        spec = (spec or PolicySpec()).with_model(model)
    from evolve.env.task_source import parse_columns

    given = {"split_seed": split_seed, "heldout_fraction": heldout_fraction, "task_columns": parse_columns(columns)}
    splitting = {**_run_split(generation, db, suite), **{k: v for k, v in given.items() if v is not None}}
    tasks, env = load_suite_tasks(suite, split, n_tasks, seed, max_turns=max_turns, **splitting)
    if not tasks:
        raise ConfigError(f"suite {suite!r} split {split!r} has no tasks")
    originals, version = {}, None
    if verifier_version is not None:  # read and matched to the tasks before any model is loaded
        from evolve.verification.augment import versioned_tasks

        v = versioned_tasks(verifier_version, tasks)
        tasks, originals, version = [v.tasks.get(t.task_id, t) for t in tasks], v.originals, v.record
    from evolve.verification import Verifier, load_pipeline

    with tempfile.TemporaryDirectory(prefix="evolve-eval-") as tmp:
        if spec is None:
            spec, ckpt, components = _from_generation(generation, db, Path(tmp))
        else:
            ckpt, components = None, default_prompt(suite)
        spec = override_spec(spec, dotted, only_policy=True)  # a checkpoint's spec too (its weights stay)
        if prompt is not None:
            from evolve.prompt.seed import load_seed_prompt

            components = dict(load_seed_prompt(prompt).components)
        pol = load_policy(spec, checkpoint_dir=ckpt)
        with Verifier(load_pipeline(str(pipeline)) if pipeline else None, jobs=jobs) as base:
            verifier = env.wrap_verifier(base)
            report = evaluate_pass_at_k(pol, tasks, components, samples, ks, verifier, seed=seed, env=env,
                                        originals=originals)
        pol.close()
    report.update({"suite": suite, "split": split, "source": generation or str(policy or model), "model": spec.model})
    if version is not None:
        report["verifier_version"] = version
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    _print_report(report, ks)


def _print_report(report: dict, ks: list[int]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table("task", "n", "c", *[f"pass@{k}" for k in ks], title=f"{report['source']} on {report['suite']}"
              f"/{report['split']} ({report['n_tasks']} tasks x {report['samples']} samples)")
    for tid, row in report["tasks"].items():
        t.add_row(tid, str(row["n"]), str(row["c"]), *[f"{row[f'pass@{k}']:.3f}" for k in ks])
    t.add_section()
    t.add_row("overall", "", "", *[f"{report['overall'][f'pass@{k}']:.3f}" for k in ks])
    con = Console(highlight=False)
    con.print(t)
    if report["failure_classes"]:
        con.print("failures: " + ", ".join(f"{c} {n}" for c, n in report["failure_classes"].items()))
    for key in ks:
        con.print(f"pass@{key}={report['overall'][f'pass@{key}']:.4f}")
    own = report.get("original")
    if own:  # a verifier version: the table is under its tests; the tasks' own tests and the gap
        con.print(f"verifier version {report['verifier_version']['version'][:12]}: "
                  f"{report['verifier_version']['tasks_augmented_here']} of these tasks augmented; "
                  f"{own['reverified']} failing samples verified again on their own tests")
        for key in ks:
            con.print(f"own tests pass@{key}={own['overall'][f'pass@{key}']:.4f} (gap {own['gap'][f'pass@{key}']:+.4f})")


def register(app: typer.Typer) -> None:
    app.command("eval", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
                epilog="Any policy field can be set by its dotted name: --policy.sampling.temperature 0.7 "
                       "(`evolve config --fields`).")(eval_cmd)
