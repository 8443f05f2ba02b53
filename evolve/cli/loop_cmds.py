"""`evolve run`, `evolve plan`, `evolve resume`, `evolve replay`, `evolve report`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from evolve.errors import EvolveError
from evolve.util.text import one_line

if TYPE_CHECKING:
    from evolve.loop.context import Outcome
    from evolve.metrics import GenerationMetrics, OriginalMetrics
    from evolve.prompt.candidate import Candidate

DB_HELP = "SQLAlchemy URL or SQLite path (default: $EVOLVE_DB or runs/lineage.db)."


class StatusPrinter:
    """Progress bar across generations and one status line per generation."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console, transient=True)
        self.task = self.progress.add_task("generations", total=total)
        self.previous: float | None = None

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def say(self, text: str) -> None:
        # Never wrapped: off a terminal rich folds at 80 columns, which cut the database path in two.
        self.console.print(text, soft_wrap=True)

    def __call__(self, index: int, phase: str, out) -> None:
        if phase != "done":
            self.progress.update(self.task, description=f"gen {index}: {phase}")
            return
        self.progress.advance(self.task)
        # No markup and no wrapping: a proposed lesson's text is in it, and must not style or start a line.
        self.console.print(status_line(index, out.metrics, out.prompt, self.previous, new_lessons(out)),
                           markup=False, soft_wrap=True)
        if "heldout" in out.metrics:  # a generation without the check (heldout_each_generation = false)
            self.previous = out.metrics["heldout"]["pass@1"]


def new_lessons(out: Outcome) -> list[str]:
    """The lesson lines this generation's admitted proposals add to the incumbent: what reflection just
    wrote (an LM's rules are the news). Read from the outcome, not stored in the metrics, so replays of
    runs recorded before it stay metric-equal."""
    from evolve.prompt.lessons import split_lessons

    have = set(split_lessons(out.prompt.components.get("lessons", "")))
    lines = []
    for p in out.proposals:
        if p.get("accepted"):
            lines += [t for t in split_lessons(p["proposal"].candidate.components.get("lessons", "")) if t not in have]
    return list(dict.fromkeys(lines))


def challenger_text(m: GenerationMetrics, new: list[str] | None = None) -> str:
    """Each challenger sampled this generation: id, the line it adds, paired tasks, mean difference,
    anytime-valid bounds, the sign-flip p-value against its per-look threshold (signflip test),
    decision; then the pool size and how many proposals joined it."""
    items = []
    for c in m.get("challengers") or []:
        added = f" +'{one_line(c['added'], 40)}'" if c.get("added") else ""  # model text: one escaped line
        p = f" p={c['p']:.4f}/{c['p_threshold']:.4f}" if c.get("p") is not None else ""
        items.append(f"{c['id'][:8]}{added} n={c['n']} Δ={c['mean_diff']:+.3f} "
                     f"[{c['lower']:+.2f},{c['upper']:+.2f}]{p} {c['decision']}")
    joined = m.get("accepted", 0)
    head = "; ".join(items) if items else "no challenger sampled"
    shown = "".join(f" '{one_line(t, 60)}'" for t in new or [])  # model text: one escaped line
    return f"challengers: {head} (pool {len(m.get('pool') or [])}, +{joined} new{':' + shown if shown else ''})"


def gate_text(m: GenerationMetrics) -> str:
    """selection = "gate": each proposal with the line it adds, minibatch means parent -> proposal,
    validation means when it passed the minibatch, and the decision."""
    items = []
    for g in m.get("gate") or []:
        added = f" +'{one_line(g['added'], 40)}'" if g.get("added") else f" {g['kind']}"
        mb = g["minibatch"]
        text = f"{g['id'][:8]}{added}"
        if g.get("skipped"):
            text += f" skipped ({g['skipped']})"
        elif mb[0] is not None:
            text += f" mb {mb[0]:.2f}->{mb[1]:.2f}"
            if g["val"][1] is not None:
                text += f" val {g['val'][0]:.2f}->{g['val'][1]:.2f}"
            test = g.get("test")
            if test:  # passed the minibatch; the validation test decides
                p = f" p={test['p']:.2f}" if test.get("p") is not None else ""
                text += f" Δ={test['mean_diff']:+.3f}{p} " + ("PROMOTED" if test.get("promoted") else "kept parent")
            else:
                text += " accepted" if g["accepted"] else " rejected"
        items.append(text)
    return ("; proposals: " + "; ".join(items)) if items else ""


def original_text(o: OriginalMetrics) -> str:
    """Under a verifier version: held-out pass@1 under the tasks' own tests and the gap to the augmented
    figure ("the policy learned to pass weak tests" shows as a growing gap)."""
    return f"own tests pass@1 {o['pass@1']:.3f} (gap {o['gap']['pass@1']:+.3f})"


def status_line(index: int, m: GenerationMetrics, prompt: Candidate | None, previous: float | None,
                new: list[str] | None = None) -> str:
    held = (m.get("heldout") or {}).get("pass@1")
    delta = f" ({held - previous:+.3f})" if previous is not None and held is not None else ""
    update = m.get("update") or {}
    parts = [
        f"gen {index:>3}",
        f"train reward {m.get('train_reward', 0):.3f}",
        f"zero-var {m.get('zero_variance_fraction', 0):.2f}",
        f"held-out pass@1 {held:.3f}{delta}" if held is not None else "held-out not checked",
    ]
    levers = m.get("levers", {})
    if levers.get("prompt", True) and m.get("selection") == "in_group":
        parts.append(f"prompt {'PROMOTED' if m.get('promoted') else 'kept'}; "
                     f"all-fail tasks {m.get('all_fail_task_fraction', 0):.2f}; {challenger_text(m, new)}")
    elif levers.get("prompt", True):
        parts.append(f"prompt {'changed' if m.get('prompt_changed') else 'kept'} ({m.get('accepted', 0)}/"
                     f"{m.get('proposals', 0)} passed the minibatch gate){gate_text(m)}")
    else:
        parts.append("prompt frozen")
    if m.get("heldout_original"):
        parts.append(original_text(m["heldout_original"]))
    if not levers.get("weights", True):
        parts.append("weights frozen")
    elif update:
        parts.append(f"grad norm {update.get('grad_norm', 0):.3f}")
    parts.append(f"{m.get('timings', {}).get('total', 0):.1f}s")
    return " | ".join(parts)


def _announce_bootstrap(spec, say) -> None:
    """The first run on a machine builds the embedded model: say so before minutes of silence."""
    if spec.model != "tiny-coder":
        return
    from evolve.policy.tiny import BootstrapConfig
    from evolve.policy.tiny.bootstrap import is_complete, model_dir

    path = model_dir(BootstrapConfig.from_dict(dict(spec.bootstrap)))
    if not is_complete(path):
        say(f"building the embedded tiny-coder model into {path} first (once per machine; "
            "`evolve bootstrap` does the same)")


def _open_store(db: str | None):
    from evolve.lineage import LineageStore

    return LineageStore.open(db, create=True, auto_upgrade=True)


OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}  # the dotted --loop.X / --policy.X words
OVERRIDE_HELP = ("Any field can be set by its dotted name after the command: --loop.samples_per_task 8, "
                 "--loop.prompt.max_merges 0, --policy.sampling.temperature 0.7, --cluster.verifier_actors 4 "
                 "(`evolve config --fields` lists them; docs/configuration.md).")


def run(
    ctx: typer.Context,
    config: Path = typer.Option(None, "--config", help="Loop config TOML (\\[loop] table); or give it as the "
                                "first word: `evolve run CONFIG`."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    name: str = typer.Option(None, "--name", help="Run name (default: suite-mode-timestamp)."),
    generations: int = typer.Option(None, "--generations", help="= --loop.generations"),
    mode: str = typer.Option(None, "--mode", help="coupled | weights | prompt (= --loop.mode)"),
    reward: str = typer.Option(None, "--reward", help="verifier | random, the control (= --loop.reward)"),
    reflection_lm: str = typer.Option(None, "--reflection-lm", help="offline, or a litellm model string "
                                      "(= --loop.prompt.reflection_lm)"),
    reflection_api_base: str = typer.Option(None, "--reflection-api-base", help="OpenAI-compatible URL "
                                            "(= --loop.prompt.api_base)"),
    seed: int = typer.Option(None, "--seed", help="= --loop.seed"),
    policy: str = typer.Option(None, "--policy", help="Policy spec TOML, default policies/tiny-coder.toml "
                               "(= --loop.policy)."),
    model: str = typer.Option(None, "--model", help="Run this model (a local HF folder, a .gguf file or a hub "
                              "id) with the policy spec's other settings: no copied spec file."),
    suite: str = typer.Option(None, "--suite", help="Environment: a name, a .py file or a module (evolve/env), "
                              "or your own tasks: a .jsonl task file or a dataset folder (save_to_disk)."),
    columns: str = typer.Option(None, "--columns", metavar="FIELD=COLUMN,...",
                                help="Your own tasks: the column of each task field, e.g. prompt=question,"
                                     "task_id=id (the config's \\[loop.task_columns])."),
    max_turns: int = typer.Option(None, "--max-turns", help="Most policy turns of a self-repair episode "
                                  "(= --loop.max_turns)."),
    allow_weak_sandbox: bool = typer.Option(False, "--allow-weak-sandbox",
                                            help="Run even where the verifier cannot have its full isolation "
                                                 "(bubblewrap + seccomp); the level is recorded in the run."),
    ray: str = typer.Option(None, "--ray", metavar="ADDRESS",
                            help="Verify and roll out on the Ray cluster at ADDRESS (\\[cluster] backend = \"ray\")."),
    verifier_version: str = typer.Option(None, "--verifier-version", metavar="FILE",
                                         help="Train and evaluate with a verifier version written by `evolve "
                                              "augment` (the config's verifier_version); held-out is also "
                                              "reported under the tasks' own tests."),
) -> None:
    """Run autonomous evolution cycles (the embedded default with no arguments)."""
    from rich.markup import escape

    from evolve.env.task_source import parse_columns
    from evolve.loop.power import RUN_TRIALS, config_power, model_key, power_lines
    from evolve.loop.recording import BufferRecorder
    from evolve.loop.run_config import alias_overrides, parse_overrides, resolve
    from evolve.loop.runner import (
        build_session,
        initial_generation,
        load_seed_prompt,
        new_run_name,
        run_generations,
        suite_record,
        version_config,
    )
    from evolve.verification import load_pipeline

    given, dotted = parse_overrides(ctx.args)
    if given and config:
        raise EvolveError(f"two configs: --config {config} and {given}; give one")
    aliases = alias_overrides(generations=generations, mode=mode, reward=reward, seed=seed, policy=policy,
                              reflection_lm=reflection_lm, reflection_api_base=reflection_api_base,
                              suite=suite, max_turns=max_turns,
                              verifier_version=verifier_version)
    settings = resolve(config or given, aliases + dotted, model=model, ray=ray)
    cfg, spec, cluster = settings.loop, settings.spec, settings.cluster
    if columns:
        cfg = cfg.with_overrides(task_columns=parse_columns(columns))
    components = load_seed_prompt(cfg.seed_prompt)
    record = suite_record(cfg)  # reads and checks a task file now: a bad row stops before anything runs
    # the verifier version too: a bad, edited or foreign file stops here, and the run records which it is
    record.update(version_config(cfg))
    load_pipeline(cfg.pipeline)  # and the pipeline file: checked here, built by the verifier's backend
    store = _open_store(db)
    run_name = name or new_run_name(cfg)
    if store.find_run(run_name) is not None:
        raise EvolveError(f"run {run_name!r} already exists; continue it with `evolve resume {run_name}`")
    with StatusPrinter(cfg.generations) as printer, store.run_lock(run_name):
        _announce_bootstrap(spec, printer.say)
        spec_dict = spec.model_dump(mode="json")
        power = config_power(cfg, model_key(spec), RUN_TRIALS)  # what the promotion test can detect, said first
        for line in power_lines(power):
            printer.say(escape(line))
        session = build_session(store, run_name, cfg, spec_dict, components, None, None, BufferRecorder(),
                                printer.say, allow_weak_sandbox=allow_weak_sandbox, cluster=cluster)
        try:
            # a ray run records its [cluster] table (resume uses it); a local run's config is as before
            where = {"cluster": cluster.model_dump()} if cluster.backend != "local" else {}
            store.create_run(run_name, {"loop": cfg.to_dict(), "policy_spec": spec_dict,
                                        "seed_prompt": components,
                                        "verifier_isolation": session.ctx.verifier.isolation,
                                        "allow_weak_sandbox": allow_weak_sandbox, "power": power,
                                        **record, **where})
            printer.say(f"run [bold]{run_name}[/bold]: mode {cfg.mode}, reward {cfg.reward}, "
                        f"{cfg.generations} generations, db {store.target.label}")
            gid, wv, metrics, state = initial_generation(session)
            printer.say(status_line(0, metrics, None, None).split(" | train")[0]
                        + f" | held-out pass@1 {metrics['heldout']['pass@1']:.3f} (initial)"
                        + (f" | {original_text(metrics['heldout_original'])}"
                           if metrics.get("heldout_original") else ""))
            printer.previous = metrics["heldout"]["pass@1"]
            run_generations(session, gid, wv, metrics, state, cfg.generations, on_generation=printer)
        finally:
            session.close()
    typer.echo(f"done: inspect with `evolve lineage {run_name}`, plots with `evolve report {run_name} --out DIR`")


def plan(
    ctx: typer.Context,
    config: Path = typer.Argument(..., metavar="CONFIG", help="Loop config TOML (\\[loop] table), then any "
                                  "dotted overrides (--loop.samples_per_task 8)."),
    trials: int = typer.Option(None, "--trials", help="Simulated challengers a cell (default 2000)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the simulation."),
    pass_rates: Path = typer.Option(None, "--pass-rates", help="Per-task pass-rate cache (default "
                                    "benchmarks/results/pass_rates.json)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """What the config's prompt-promotion test can detect (P(promoted) of a +5 / +10-point lesson and of a
    line that changes nothing), simulated from the suite's per-task pass rates; runs nothing."""
    from evolve.loop.power import TRIALS, config_power, model_key, power_lines
    from evolve.loop.run_config import parse_overrides, resolve

    # click hands CONFIG the first extra word when a dotted one comes first: CONFIG is the bare word
    given, dotted = parse_overrides([str(config), *ctx.args])
    settings = resolve(given, dotted, need_cluster=False)
    table = config_power(settings.loop, model_key(settings.spec), trials or TRIALS, seed, pass_rates)
    typer.echo(json.dumps(table, indent=1) if as_json else "\n".join(power_lines(table)))


def config_cmd(
    ctx: typer.Context,
    fields: bool = typer.Option(False, "--fields", help="List every dotted setting with its type and meaning."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Print a run's resolved settings (the loop table, the policy spec, the cluster table) for `evolve config [CONFIG]
    [--loop.X V ...]`, exactly what `evolve run` with the same words would record; runs nothing."""
    from evolve.loop.run_config import all_fields, parse_overrides, resolve

    if fields:
        rows = all_fields()
        typer.echo(json.dumps(rows, indent=1) if as_json else
                   "\n".join(f"--{path} ({kind}): {text}" for path, (kind, text) in rows.items()))
        return
    given, dotted = parse_overrides(ctx.args)
    s = resolve(given, dotted)
    typer.echo(json.dumps({"loop": s.loop.to_dict(), "policy_spec": s.spec.model_dump(mode="json"),
                           "cluster": s.cluster.model_dump(mode="json")}, indent=1))


def resume(
    run_name: str = typer.Argument(..., metavar="RUN"),
    from_gen: str = typer.Option(None, "--from", help="Fork a new branch from this generation (RUN:INDEX or id)."),
    generations: int = typer.Option(None, "--generations", help="Generations to add (default: the run's)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    ray: str = typer.Option(None, "--ray", metavar="ADDRESS", help="Ray cluster address (default: the run's)."),
    local: bool = typer.Option(False, "--local", help="Verify and roll out in this process, whatever the run used."),
) -> None:
    """Continue a run from its newest committed generation, or fork from any generation."""
    with _open_store(db) as store, store.run_lock(run_name):  # never two writers: the lock comes first
        _resume(store, run_name, from_gen, generations, ray, local)

def _resume(store, run_name, from_gen, generations, ray, local) -> None:
    from evolve.cluster import ClusterConfig
    from evolve.loop.runner import run_generations, session_from_generation

    run_row = store.get_run(run_name)
    recorded = None if local else run_row.config.get("cluster")
    cluster = ClusterConfig.from_dict(recorded, source=f"run {run_name}", address=None if local else ray)
    dropped = store.discard_pending(run_name)
    if dropped:
        typer.echo(f"discarded {dropped} half-written generation(s)", err=True)
    if from_gen:
        ref = from_gen if ":" in from_gen or not from_gen.isdigit() else f"{run_name}:{from_gen}"
        parent = store.resolve_generation(ref)
        if parent.run_id != run_row.id:
            raise EvolveError(f"generation {from_gen} does not belong to run {run_name}")
    else:
        parent = store.latest_committed(run_name)
        if parent is None:
            raise EvolveError(f"run {run_name} has no committed generation to resume from")
    count = generations if generations is not None else run_row.config["loop"]["generations"]
    with StatusPrinter(count) as printer:
        session, state, tmp = session_from_generation(store, run_row, parent, printer.say, cluster=cluster)
        try:
            printer.say(f"{'fork' if from_gen else 'resume'} {run_name} from generation {parent.index}")
            printer.previous = (parent.metrics or {}).get("heldout", {}).get("pass@1")
            run_generations(session, parent.id, parent.weights_version, parent.metrics or {}, state, count,
                            on_generation=printer)
        finally:
            session.close()
            tmp.cleanup()


def replay(
    gen: str = typer.Argument(..., metavar="GEN", help="RUN:INDEX or generation id"),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Re-run a generation from its parent's state with recorded seeds and LM calls; compare its prompt and
    weights hashes, every rollout and every metric with the record (exit 0 iff all equal)."""
    from evolve.lineage import LineageStore
    from evolve.loop.replay import replay_generation

    store = LineageStore.open(db, create=False)
    report = replay_generation(store, gen, say=lambda s: typer.echo(s, err=True))
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for what, rec, rep, eq in (("prompt", report.recorded_prompt, report.replayed_prompt, report.prompt_equal),
                                   ("weights", report.recorded_weights, report.replayed_weights,
                                    report.weights_equal)):
            typer.echo(f"{what:8} recorded {str(rec)[:16]}  replayed {str(rep)[:16]}  "
                       f"{'EQUAL' if eq else 'DIFFERENT'}")
        typer.echo(f"rollouts {report.n_rollouts} (completion, reward, verdict)  "
                   f"{'EQUAL' if report.rollouts_equal else 'DIFFERENT'}")
        typer.echo(f"metrics  (all but timings)  {'EQUAL' if report.metrics_equal else 'DIFFERENT'}")
        for note in report.notes:
            typer.echo(f"note: {note}")
        if report.first_difference:
            typer.echo(f"first difference: {report.first_difference}")
        typer.echo(f"replay of {report.generation}: {'identical' if report.ok else 'MISMATCH'}")
    raise typer.Exit(0 if report.ok else 1)


def report(
    run_name: str = typer.Argument(..., metavar="RUN"),
    out: Path = typer.Option(..., "--out", help="Folder for the SVG charts and summary.md"),
    db: str = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Write plots and a Markdown summary of a run."""
    from evolve.lineage import LineageStore
    from evolve.loop.report import write_report

    store = LineageStore.open(db, create=False)
    files = write_report(store, run_name, out)
    for f in files:
        typer.echo(str(f))


def register(app: typer.Typer) -> None:
    app.command("run", context_settings=OVERRIDES, epilog=OVERRIDE_HELP)(run)
    app.command("plan", context_settings=OVERRIDES, epilog=OVERRIDE_HELP)(plan)
    app.command("config", context_settings=OVERRIDES, epilog=OVERRIDE_HELP)(config_cmd)
    app.command("resume")(resume)
    app.command("replay")(replay)
    app.command("report")(report)
