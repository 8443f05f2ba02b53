"""A real LM reflector (Qwen2.5-Coder-1.5B served on 127.0.0.1) against the lesson-library reflector, on
the gym's hard tier with the tiny policy.

Two stages, each merged into benchmarks/results/reflector_lm.json (the other stage's figures are kept):

``--stage variants``: which reflection prompt makes a 1.5B write a lesson that transfers. Reflective
datasets come from the tiny model's rollouts on ``--datasets`` seeded sets of 8 hard-tier train tasks x 8
samples under the seed prompt. For each dataset and prompt variant, one request samples ``--drafts``
drafts (temperature 0.7). Every draft that yields a text is put into the seed prompt's ``lessons`` and
scored by the tiny model's held-out pass@1 (``--heldout`` hard-tier held-out tasks x 8 samples), against
the seed prompt and against the boundary lesson. Variants: ``rewrite`` (the reflector's former
GEPA-style prompt: rewrite the whole component, JSON reply), ``rule-raw`` (one general rule from
several tasks, plain reply, first line taken, no filter) and ``rule`` (the same replies through
:func:`evolve.prompt.reflect.lm_rule.filter_rule`).

``--stage loop``: ``evolve run --mode prompt`` with the served 1.5B as reflector against the offline
reflector, same seeds; held-out pass@1 start and end, the lessons written and promoted, and the
held-out effect of every promoted line on the base model (a line that "changes nothing" moves held-out
pass@1 by less than 2 points).

    evolve serve --policy policies/qwen2.5-coder-1.5b-instruct.toml --port 8011 &   # under the lock
    python benchmarks/reflector_lm.py --stage variants --api-base http://127.0.0.1:8011/v1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_io import RESULTS_DIR, machine_facts, print_figures, write_results  # noqa: E402

from evolve.prompt.reflect.lm_rule import episode_text  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no fetch of litellm's price list
SEED_SYSTEM = "Write a Python function that solves the task."
BOUNDARY = "Include the boundary value k."
# The comparator: the project's former LM-reflector prompt (GEPA-style: rewrite the whole component from
# the traces, JSON reply), kept here only so the measurement that replaced it can be rerun.
REWRITE_PROMPT = """I gave a code-writing assistant the following text as the "{component}" part of its instructions:
```
{current}
```
Here are tasks it was given under these instructions, what it wrote, and the verifier's feedback.
Failures come first, grouped by failure signature, with a few successes for contrast:
{examples}

Failure signatures over all {n_failures} failures in {n_rollouts} attempts:
{groups}

Write an improved "{component}" text that fixes the failures without breaking the successes.
Keep it short and general: state rules, not answers to these particular tasks.{shape}
Reply with only a JSON object: {{"new_instruction": "<the new text>"}}"""

_WS = re.compile(r"\s*")
_LANGS = ("json", "text", "markdown")


def fenced_body(text: str) -> str | None:
    """The body of the first fenced block, as ``re.search(r"```(?:json|text|markdown)?\\s*\\n?(.*?)```",
    text, re.S).group(1)`` would give it (None where that finds no match), in linear time: that regex
    backtracks quadratically over a reply with an opening fence, a long run of whitespace and no
    closing fence (44 s for 40,000 characters here). The match, when there is one, always starts at
    the first fence, so one scan finds it: the body starts after the language word and the
    whitespace, and runs to the next fence."""
    i = text.find("```")
    if i < 0:
        return None
    start = i + 3
    for lang in _LANGS:
        if text.startswith(lang, start):
            start += len(lang)
            break
    start = _WS.match(text, start).end()
    end = text.find("```", start)
    return text[start:end] if end >= 0 else None


def rewrite_messages(component: str, current: str, dataset) -> list[dict]:
    examples = "\n".join(
        f"### Example {i + 1} ({'passed' if r['passed'] else 'failed'})\nTask:\n{r['inputs']}\n"
        f"Output:\n{r['output']}\nFeedback: {r['feedback']}" + episode_text(r) for i, r in enumerate(dataset.records))
    groups = "\n".join(f"- {g['signature']}: {g['count']}" for g in dataset.groups) or "- none"
    shape = " One short rule per line." if component == "lessons" else ""
    text = REWRITE_PROMPT.format(component=component, current=current or "(empty)", examples=examples or "(none)", shape=shape,
                         groups=groups, n_failures=dataset.n_failures, n_rollouts=dataset.n_rollouts)
    return [{"role": "user", "content": text}]


def parse_rewrite(content: str | None, finish_reason: str | None, max_chars: int) -> tuple[str | None, str | None]:
    """(new text, None) or (None, why it was rejected)."""
    if finish_reason == "length":
        return None, "rejected: truncated reply (finish_reason=length)"
    text = (content or "").strip()
    if not text:
        return None, "rejected: empty reply"
    if text.count("```") % 2:
        return None, "rejected: unbalanced code fence"
    fenced = fenced_body(text)
    body = fenced.strip() if fenced is not None else text
    if body.startswith("{"):
        try:
            obj = json.loads(body)
        except json.JSONDecodeError:
            return None, "rejected: reply is not valid JSON"
        new = obj.get("new_instruction") if isinstance(obj, dict) else None
        if not isinstance(new, str):
            return None, "rejected: JSON reply has no string 'new_instruction'"
        body = new.strip()
    if not body:
        return None, "rejected: empty instruction"
    if len(body) > max_chars:
        return None, f"rejected: instruction longer than {max_chars} characters"
    return body, None


NOTHING = 0.02  # |held-out pass@1 change| below this: the line changes nothing (the eval's noise is ~1.5 points)


def _load_previous() -> dict:
    path = RESULTS_DIR / "reflector_lm.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _write(stage: str, args, results: dict, figures: dict) -> None:
    prev = _load_previous()
    all_results = dict(prev.get("results") or {})
    all_figures = {k: v for k, v in (prev.get("figures") or {}).items() if not k.startswith(stage + "_")}
    all_results[stage] = {**results, "machine": machine_facts(), "args": vars(args)}
    all_figures.update({f"{stage}_{k}": v for k, v in figures.items()})
    write_results("reflector_lm", args=vars(args), results=all_results, figures=dict(sorted(all_figures.items())))
    print_figures({f"{stage}_{k}": v for k, v in figures.items()})


class Gym:
    """The tiny policy, the verifier and the hard tier: rollouts and held-out pass@1 of a lessons text."""

    def __init__(self, heldout: int, seed: int, policy: str = "policies/tiny-coder.toml"):
        from evolve.gym import load_gym, load_tier
        from evolve.policy import PolicySpec, load_policy
        from evolve.verification import Verifier

        # "teacher": the gym's imperfect teacher writes the failing traces (the bugs the default model
        # inherited, at the bootstrap's rates); no model needed. Scoring a lesson still needs the policy.
        self.teacher = policy == "teacher"
        self._policy_path = "policies/tiny-coder.toml" if self.teacher else policy
        self._policy = None if self.teacher else load_policy(PolicySpec.from_toml(REPO / policy))
        self.train = load_tier("hard", load_gym("train"))
        held = load_tier("hard", load_gym("heldout"))
        self.heldout = [held[i] for i in sorted(random.Random(seed).sample(range(len(held)), min(heldout, len(held))))]
        self.verifier = Verifier(None, jobs=2)
        self.cache: dict[str, dict] = {}
        self.seed = seed

    @property
    def policy(self):
        if self._policy is None:
            from evolve.policy import PolicySpec, load_policy

            self._policy = load_policy(PolicySpec.from_toml(REPO / self._policy_path))
        return self._policy

    def rollouts(self, tasks, samples: int, seed: int):
        from evolve.env.episode import collect, verify
        from evolve.env.suites import SuiteEnv
        from evolve.policy.evaluate import _Prompt

        if self.teacher:
            return self._teacher_rollouts(tasks, samples, seed)
        env = SuiteEnv("tasks", lambda: {"train": tasks})
        rolls = collect(env, self.policy, _Prompt({"system": SEED_SYSTEM, "lessons": ""}), tasks, samples, seed,
                        "train", "", self.verifier)
        verify(self.verifier, {t.task_id: t for t in tasks}, rolls, None)
        return rolls

    def _teacher_rollouts(self, tasks, samples: int, seed: int):
        from evolve.env.episode import verify
        from evolve.env.render import render_messages
        from evolve.gym.teacher import teacher_solution
        from evolve.policy.tiny import BootstrapConfig
        from evolve.rollout import Rollout

        cfg = BootstrapConfig.preset("default")
        rates = {"CMP": cfg.bug_cmp, "DIV": cfg.bug_div, "EMPTY": cfg.bug_empty, "OFF1": cfg.bug_off1}
        rng = random.Random(seed)
        comps = {"system": SEED_SYSTEM, "lessons": ""}
        rolls = []
        for g, t in enumerate(tasks):
            messages = render_messages(comps, t)
            for i in range(samples):
                code, _bugs = teacher_solution(t, rng, SEED_SYSTEM, rates)
                rolls.append(Rollout(t.task_id, g, i, "seed", "teacher", messages, "", code))
        verify(self.verifier, {t.task_id: t for t in tasks}, rolls, None)
        return rolls

    def score(self, lessons: str) -> dict:
        """Held-out pass@1 (8 samples per task) of the seed instruction plus ``lessons``; cached."""
        from evolve.policy.evaluate import evaluate_pass_at_k

        if lessons not in self.cache:
            res = evaluate_pass_at_k(self.policy, self.heldout, {"system": SEED_SYSTEM, "lessons": lessons}, 8, [1, 8],
                                     self.verifier, seed=self.seed + 1000)
            self.cache[lessons] = {"pass@1": round(res["overall"]["pass@1"], 4),
                                   "pass@8": round(res["overall"]["pass@8"], 4)}
        return self.cache[lessons]

    def close(self):
        self.verifier.close()


def _ask(model: str, api_base: str, messages: list[dict], n: int, max_tokens: int, seed: int) -> dict:
    import litellm

    t0 = time.perf_counter()
    resp = litellm.completion(model=model, api_base=api_base, api_key="sk-local", messages=messages, n=n,
                              temperature=0.7, max_tokens=max_tokens, seed=seed, timeout=1800, num_retries=0)
    return {"seconds": round(time.perf_counter() - t0, 1), "load": [round(x, 2) for x in os.getloadavg()],
            "choices": [{"content": c.message.content, "finish_reason": c.finish_reason} for c in resp.choices],
            "usage": {"prompt": resp.usage.prompt_tokens, "completion": resp.usage.completion_tokens}}


def _variant_texts(variant: str, reply: dict, records: list[dict]) -> list[dict]:
    from evolve.prompt.reflect.lm_rule import filter_rule

    out = []
    for c in reply["choices"]:
        if variant == "rewrite":
            text, why = parse_rewrite(c["content"], c["finish_reason"], 4000)
        elif variant == "rule":
            text, why = filter_rule(c["content"], c["finish_reason"], records, [])
        else:  # rule-raw: the first non-empty line, whatever it says
            lines = [ln.strip() for ln in (c["content"] or "").splitlines() if ln.strip()]
            text, why = (lines[0], None) if lines else (None, "empty")
        out.append({"text": text, "why": why})
    return out


def stage_variants(args) -> None:
    """LM replies are cached in ``--out``/variants_replies.json: ``--replies-only`` collects them (the only
    part that needs the served 1.5B, so the big-model lock is held no longer than that), a second call
    scores them with the tiny model."""
    from evolve.prompt import PromptEvolutionConfig, build_reflective_dataset
    from evolve.prompt.reflect.lm_rule import RULE_MAX_TOKENS, pick_records, render_rule_prompt

    cache_path = REPO / args.out / "variants_replies.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    gym = Gym(args.heldout, args.seed, args.policy)
    cfg = PromptEvolutionConfig(max_field_chars=300)
    rows = []
    try:
        for d in range(args.datasets):
            rng = random.Random(args.seed * 100 + d)
            tasks = [gym.train[i] for i in sorted(rng.sample(range(len(gym.train)), 8))]
            ds = build_reflective_dataset(gym.rollouts(tasks, 8, args.seed * 100 + d), cfg, rng)
            records = pick_records(ds.records)
            prompts = {"rewrite": rewrite_messages("lessons", "", ds),
                       "rule": [{"role": "user", "content": render_rule_prompt(
                           SEED_SYSTEM, records, ds.groups, ds.n_failures, ds.n_rollouts)}]}
            for prompt_name, messages in prompts.items():
                if prompt_name not in args.prompts.split(","):
                    continue
                key = f"{args.seed}/{d}/{prompt_name}/{args.drafts}"
                if key not in cache or cache[key]["messages"] != messages:
                    cache[key] = {"messages": messages, **_ask(
                        args.model, args.api_base, messages, args.drafts,
                        200 if prompt_name == "rewrite" else RULE_MAX_TOKENS, args.seed * 100 + d)}
                    cache_path.parent.mkdir(parents=True, exist_ok=True)
                    cache_path.write_text(json.dumps(cache, indent=1))
                reply = cache[key]
                print(f"# dataset {d} {prompt_name}: {reply['seconds']} s, load {reply['load'][0]}", flush=True)
                if not args.replies_only:
                    rows += _score_reply(gym if not args.no_score else None, d, prompt_name, reply, records)
        if args.replies_only:
            return
        base, boundary = (None, None) if args.no_score else (gym.score(""), gym.score(BOUNDARY))
    finally:
        gym.close()
    _write("variants", args, {"rows": rows, "seed_prompt": base, "boundary_lesson": boundary,
                              "replies": cache}, _variant_figures(rows, base, boundary))


def _score_reply(gym, d: int, prompt_name: str, reply: dict, records: list[dict]) -> list[dict]:
    rows = []
    for variant in (["rewrite"] if prompt_name == "rewrite" else ["rule-raw", "rule"]):
        for i, t in enumerate(_variant_texts(variant, reply, records)):
            row = {"dataset": d, "variant": variant, "draft": i, **t, "reply": reply["choices"][i]["content"],
                   "seconds": reply["seconds"], "load": reply["load"]}
            if t["text"] and gym is not None:
                row["heldout"] = gym.score(t["text"])
            rows.append(row)
            print(f"#   {variant}[{i}] {json.dumps(t['text'] or t['why'])[:140]} "
                  f"{row.get('heldout', {}).get('pass@1')}", flush=True)
    return rows


def _he_records(db: str) -> list[dict]:
    """Failing rollouts of a humaneval-chat run (its lineage) as reflective-dataset records."""
    import sqlite3

    from evolve.gym.chat import load_chat_suite
    from evolve.prompt.reflective_dataset import truncate

    tasks = {t.task_id: t for part in load_chat_suite("humaneval-chat", 0, 0.25).values() for t in part}
    con = sqlite3.connect(db)
    rows = con.execute("select task_id, completion, error_class, trace from rollout where passed = 0 "
                       "and purpose = 'train' order by id").fetchall()
    con.close()
    return [{"task_id": tid, "passed": False, "inputs": truncate(tasks[tid].prompt, 600),
             "output": truncate(out, 600), "feedback": truncate(f"{err}: {trace}", 300)}
            for tid, out, err, trace in rows]


def stage_variants_he(args) -> None:
    """The same two prompts on HumanEval failures of the 0.5B (from ``--source-db``, a qwen-humaneval run):
    which drafts pass, which restate a task. No held-out effect (scoring each draft with the 0.5B is
    beyond this machine)."""
    from evolve.prompt.reflect.lm_rule import RULE_MAX_TOKENS, pick_records, render_rule_prompt
    from evolve.prompt.reflective_dataset import ReflectiveDataset

    records = pick_records(_he_records(args.source_db))
    system = "You are an expert Python programmer. Complete the function so that it satisfies its docstring."
    rows = []
    for d in range(0, min(len(records), 8 * args.datasets), 8):
        recs = records[d:d + 8]
        groups = [{"signature": e, "count": sum(r["feedback"].startswith(e) for r in recs)}
                  for e in sorted({r["feedback"].split(":")[0] for r in recs})]
        ds = ReflectiveDataset(groups, recs, len(recs), len(recs))
        prompts = {"rewrite": rewrite_messages("lessons", "", ds),
                   "rule": [{"role": "user", "content": render_rule_prompt(system, recs, groups, len(recs), len(recs))}]}
        for name, messages in prompts.items():
            reply = _ask(args.model, args.api_base, messages, args.drafts,
                         200 if name == "rewrite" else RULE_MAX_TOKENS, d)
            print(f"# humaneval dataset {d // 8} {name}: {reply['seconds']} s, load {reply['load'][0]}", flush=True)
            for variant in (["rewrite"] if name == "rewrite" else ["rule-raw", "rule"]):
                for i, t in enumerate(_variant_texts(variant, reply, recs)):
                    rows.append({"dataset": d // 8, "variant": variant, "draft": i, **t,
                                 "reply": reply["choices"][i]["content"], "seconds": reply["seconds"],
                                 "load": reply["load"], "tasks": sorted({r["task_id"] for r in recs})})
                    print(f"#   {variant}[{i}] {json.dumps(t['text'] or t['why'])[:160]}", flush=True)
    figs = {}
    for v in ("rewrite", "rule-raw", "rule"):
        rs = [r for r in rows if r["variant"] == v]
        names = set()
        for r in records:
            names |= set(re.findall(r"def (\w+)\(", r["inputs"]))
        figs[f"{v.replace('-', '_')}_drafts"] = len(rs)
        figs[f"{v.replace('-', '_')}_accepted"] = sum(bool(r["text"]) for r in rs)
        figs[f"{v.replace('-', '_')}_names_a_task_function"] = sum(
            bool(r["text"]) and any(n in r["text"] for n in names) for r in rs)
    _write("humaneval_variants", args, {"rows": rows, "source_db": args.source_db}, figs)


def _variant_figures(rows: list[dict], base: dict | None, boundary: dict | None) -> dict:
    from evolve.gym.notes import NOTES

    figs = {"seed_pass_at_1": base["pass@1"], "boundary_lesson_pass_at_1": boundary["pass@1"]} if base else {}
    notes = {n.lower() for n in NOTES.values()}
    for v in ("rewrite", "rule-raw", "rule"):
        rs = [r for r in rows if r["variant"] == v]
        texts = [r for r in rs if r["text"]]
        deltas = [r["heldout"]["pass@1"] - base["pass@1"] for r in texts if base and "heldout" in r]
        key = v.replace("-", "_")
        figs[f"{key}_drafts"] = len(rs)
        figs[f"{key}_accepted"] = len(texts)
        if base:  # scored: each accepted draft's held-out effect on the tiny model
            figs[f"{key}_mean_delta_points"] = round(100 * sum(deltas) / len(deltas), 2) if deltas else 0.0
            figs[f"{key}_best_delta_points"] = round(100 * max(deltas), 2) if deltas else 0.0
            figs[f"{key}_helps"] = sum(d >= NOTHING for d in deltas)
            figs[f"{key}_hurts"] = sum(d <= -NOTHING for d in deltas)
            figs[f"{key}_changes_nothing"] = sum(abs(d) < NOTHING for d in deltas)
        figs[f"{key}_boundary_found"] = sum(BOUNDARY.lower() in (r["text"] or "").lower() for r in rs)
        # the gym's teacher follows a note only as a whole line: these are the lines that can switch a bug off
        figs[f"{key}_a_note_line"] = sum(any(ln.strip().lower() in notes for ln in (r["text"] or "").splitlines())
                                         for r in rs)
    return figs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", choices=["variants", "variants-humaneval", "loop"], required=True)
    ap.add_argument("--source-db", help="variants-humaneval: a qwen-humaneval run's lineage (SQLite file)")
    ap.add_argument("--api-base", default="http://127.0.0.1:8011/v1")
    ap.add_argument("--model", default="openai/qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--datasets", type=int, default=4, help="reflective datasets (seeded sets of 8 train tasks)")
    ap.add_argument("--drafts", type=int, default=3, help="drafts sampled per request")
    ap.add_argument("--heldout", type=int, default=48, help="hard-tier held-out tasks scoring each lesson")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policy", default="policies/tiny-coder.toml", help="the gym's policy (a dry run: tiny-coder-ci)")
    ap.add_argument("--seeds", default="0,1", help="loop stage: run seeds")
    ap.add_argument("--replies-only", action="store_true", help="variants stage: collect the LM replies only")
    ap.add_argument("--prompts", default="rewrite,rule", help="variants stage: which prompts to send")
    ap.add_argument("--no-score", action="store_true", help="variants stage: no held-out scoring of the drafts")
    ap.add_argument("--budget", type=int, default=None, help="loop stage: learning rollouts per run "
                    "(default: configs/ablation.toml's 1024)")
    ap.add_argument("--arms", default="offline,lm", help="loop stage: which reflectors to run")
    ap.add_argument("--out", default="runs/reflector_lm", help="loop stage: runs folder (finished runs reused)")
    args = ap.parse_args()
    if args.stage == "variants":
        stage_variants(args)
    elif args.stage == "variants-humaneval":
        stage_variants_he(args)
    else:
        from reflector_lm_loop import stage_loop

        stage_loop(args, Gym, _write, _load_previous)


if __name__ == "__main__":
    main()
