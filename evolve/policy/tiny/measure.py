"""Measuring a bootstrapped model on held-out gym tasks with the sandboxed verifier.

pass@1 and pass@k under the seed instruction, and for every instruction line
(notes and distractors) pass@1 with "seed instruction + that line", overall and
on the tasks where the line's bug mode applies.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from evolve.env.render import render_messages
from evolve.gym import load_gym
from evolve.gym.notes import DISTRACTORS, NOTES, SEED_INSTRUCTION
from evolve.policy.tiny.config import BootstrapConfig
from evolve.util.passk import mean_pass_at_k
from evolve.verification.types import Task


def sample_completions(model, tokenizer, prompts: list[str], n: int, cfg: BootstrapConfig, seed: int,
                       on_batch: Callable[[int], None] | None = None) -> list[list[str]]:
    """``n`` sampled completions per prompt text (temperature 1, top-p 1, no top-k), KV-cached."""
    import torch

    per_call = max(1, cfg.eval_batch // n)
    out: list[list[str]] = []
    tokenizer.padding_side = "left"
    for b, start in enumerate(range(0, len(prompts), per_call)):
        chunk = prompts[start:start + per_call]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        torch.manual_seed(seed * 100_003 + b)
        with torch.no_grad():
            gen = model.generate(
                **enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, num_return_sequences=n,
                max_new_tokens=cfg.eval_max_new_tokens, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id, use_cache=True,
            )
        texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        out += [texts[i * n:(i + 1) * n] for i in range(len(chunk))]
        if on_batch:
            on_batch(len(chunk) * n)
    return out


def verify(pairs: list[tuple[Task, str]], jobs: int = 2) -> tuple[list[bool], str]:
    """Pass/fail per (task, completion) through the sandboxed evolve.verification.Verifier."""
    from evolve.verification import Verifier

    with Verifier(jobs=jobs) as v:
        return [r.passed for r in v.verify_batch(pairs)], f"evolve.verification.Verifier ({v.isolation})"


def conditions() -> dict[str, str]:
    """Condition name -> system message: the seed instruction, plus one line, plus all notes."""
    out = {"base": SEED_INSTRUCTION}
    for mode, line in NOTES.items():
        out[f"note:{mode}"] = f"{SEED_INSTRUCTION}\n{line}"
    for i, line in enumerate(DISTRACTORS):
        out[f"distractor:{i}"] = f"{SEED_INSTRUCTION}\n{line}"
    out["all-notes"] = "\n".join([SEED_INSTRUCTION, *NOTES.values()])
    return out


def measure(model, tokenizer, cfg: BootstrapConfig,
            on_progress: Callable[[int, int], None] | None = None) -> dict:
    """Held-out figures of a model; see the module docstring. Deterministic for ``cfg.eval_seed``."""
    t0 = time.perf_counter()
    tasks = load_gym("heldout", seed=cfg.gym_seed, n=cfg.eval_tasks)
    conds = conditions()
    total = len(tasks) * (cfg.eval_samples + cfg.eval_line_samples * (len(conds) - 1))
    done = [0]

    def tick(k: int) -> None:
        done[0] += k
        if on_progress:
            on_progress(done[0], total)

    passed: dict[str, list[list[bool]]] = {}
    verifier_name = ""
    gen_s = ver_s = 0.0
    for ci, (name, system) in enumerate(conds.items()):
        n = cfg.eval_samples if name == "base" else cfg.eval_line_samples
        prompts = [tokenizer.apply_chat_template(render_messages({"system": system}, t),
                                                 add_generation_prompt=True, tokenize=False) for t in tasks]
        g0 = time.perf_counter()
        comps = sample_completions(model, tokenizer, prompts, n, cfg, cfg.eval_seed + ci, tick)
        g1 = time.perf_counter()
        flat, verifier_name = verify([(t, c) for t, cs in zip(tasks, comps, strict=True) for c in cs])
        ver_s += time.perf_counter() - g1
        gen_s += g1 - g0
        passed[name] = [flat[i * n:(i + 1) * n] for i in range(len(tasks))]
    return summarize(tasks, passed, cfg) | {
        "verifier": verifier_name, "eval_tasks": len(tasks), "generate_s": round(gen_s, 2),
        "verify_s": round(ver_s, 2), "measure_s": round(time.perf_counter() - t0, 2),
    }


def _p1(rows: list[list[bool]]) -> float:
    return mean_pass_at_k([(len(r), sum(r)) for r in rows], 1)


def summarize(tasks: list[Task], passed: dict[str, list[list[bool]]], cfg: BootstrapConfig) -> dict:
    base = passed["base"]
    k = cfg.eval_samples
    p1, pk = _p1(base), mean_pass_at_k([(len(r), sum(r)) for r in base], k)
    lines = {}
    for name, rows in passed.items():
        if name == "base":
            continue
        mode = name.split(":", 1)[1] if name.startswith("note:") else None
        idx = [i for i, t in enumerate(tasks) if mode in t.meta.get("bug_modes", ())] if mode else []
        entry = {"line": _line_of(name), "pass@1": round(_p1(rows), 4), "delta": round(_p1(rows) - p1, 4)}
        if idx:
            sub_with, sub_base = _p1([rows[i] for i in idx]), _p1([base[i] for i in idx])
            entry |= {"applicable_tasks": len(idx), "applicable_base": round(sub_base, 4),
                      "applicable_with": round(sub_with, 4), "applicable_delta": round(sub_with - sub_base, 4)}
        lines[name] = entry
    zero = sum(1 for r in base if not any(r)) / len(base)
    return {"pass@1": round(p1, 4), f"pass@{k}": round(pk, 4), "k": k,
            "ratio": round(pk / p1, 3) if p1 > 0 else None, "all_fail_task_share": round(zero, 4),
            "lines": lines}


def _line_of(name: str) -> str:
    if name.startswith("note:"):
        return NOTES[name.split(":", 1)[1]]
    if name.startswith("distractor:"):
        return DISTRACTORS[int(name.split(":", 1)[1])]
    return "all notes"
