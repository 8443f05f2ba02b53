"""Sample Qwen2.5-Coder on HumanEval under named generation modes, keeping every raw reply (issue 37 item 2).

The sampling half of ``benchmarks/humaneval_grading.py`` (which grades what this writes). It runs in
.venv-vllm: one vLLM CPU engine per process on a shipped policy spec's model, built with the backend's own
``engine_kwargs`` (the same engine the loop samples with), but with the sampling settings of a MODE:

- ``greedy``: temperature 0 (argmax), the loop's prompt (prompts/humaneval.toml + the chat rendering),
  384 new tokens, stop after the first code block: the figure the maker reports is greedy pass@1;
- ``greedy-long``: greedy with 1,024 new tokens (for the tasks ``greedy`` ran out of tokens on, ``--only``);
- ``loop``: the loop's own draw (T 0.7, top-p 0.95, top-k off, repetition penalty 1.0);
- ``model``: the model's own generation settings (``evolve.policy.genconfig``; the spec records them);
- ``maker-greedy``: greedy with EvalPlus's instruct prompt (the harness the Qwen2.5-Coder report's HumanEval
  figures come from): no system line, the instruction prefix, the prompt in a fence, and the assistant turn
  pre-filled with EvalPlus's response prefix and an opened ```python fence; 768 new tokens.

Records are appended per engine call to the job's JSONL, and a rerun skips the (task, sample) pairs
already there, so a stopped run loses at most one batch:

    .venv-vllm/bin/python benchmarks/humaneval_sample.py --model 0.5b --job greedy:all:1 --job loop:heldout:8

(one engine for every job; each writes runs/he_grading/qwen<MODEL>-<MODE>-<SPLIT>.jsonl).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

POLICIES = {"0.5b": REPO / "policies" / "qwen2.5-coder-0.5b-vllm-cpu.toml",
            "1.5b": REPO / "policies" / "qwen2.5-coder-1.5b-instruct.toml"}
MODES = ("greedy", "greedy-long", "loop", "model", "maker-greedy")
# EvalPlus's chat prompt (evalplus/provider/utility.py, make_raw_chat_prompt), read, not imported: EvalPlus
# is not installed here.
MAKER_INSTRUCTION = "Please provide a self-contained Python script that solves the following problem in a markdown code block:"
MAKER_RESPONSE = "Below is a Python script with a self-contained function that solves the problem and passes corresponding tests:"


# The model's own sampling settings, written down by hand: the GGUF parts carry no sampling keys, so the
# dequantised folder's generation_config.json has none (docs/humaneval.md). Qwen2.5-Coder-Instruct's hub
# generation_config.json: temperature 0.7, top_p 0.8, top_k 20 (the 32B-Instruct's file, the one copy the
# search tools reach, reads so, with repetition_penalty 1.05); repetition_penalty 1.1 is the small Qwen2.5
# instruct models' value as remembered, not checked here (no hub access).
QWEN_CODER_GENERATION = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.1}


def model_generation_config(path: str) -> dict:
    """The model folder's own sampling settings, the hub's values for any key it lacks."""
    cfg = json.loads((Path(path) / "generation_config.json").read_text())
    return {k: cfg.get(k, v) for k, v in QWEN_CODER_GENERATION.items()}


def load_spec(model: str, kv_gib: float):
    """The 0.5B's vLLM spec; for the 1.5B the same spec with the 1.5B's model and checksum."""
    from evolve.policy.spec import PolicySpec

    raw = tomllib.loads(POLICIES["0.5b"].read_text())
    if model == "1.5b":
        big = tomllib.loads(POLICIES["1.5b"].read_text())
        raw.update(model=big["model"], model_sha256=big["model_sha256"])
    raw.setdefault("vllm", {})["cpu_kv_cache_gib"] = kv_gib
    return PolicySpec.model_validate(raw)


def mode_params(mode: str, spec, genconfig: dict, n: int, seed: int, eos):
    from vllm import SamplingParams

    from evolve.policy.backends.vllm_code_block import EXTRA_ARG

    stop = {EXTRA_ARG: min(eos)} if mode != "maker-greedy" else None
    budget = {"maker-greedy": 768, "greedy-long": 1024}.get(mode, spec.sampling.max_new_tokens)
    base = dict(n=n, seed=seed, stop_token_ids=sorted(eos), extra_args=stop, max_tokens=budget)
    if mode in ("greedy", "greedy-long", "maker-greedy"):
        return SamplingParams(temperature=0.0, **base), {"temperature": 0.0}
    if mode == "loop":
        s = spec.sampling
        knobs = {"temperature": s.temperature, "top_p": s.top_p, "top_k": 0, "repetition_penalty": 1.0}
    else:
        knobs = {k: genconfig[k] for k in ("temperature", "top_p", "top_k", "repetition_penalty")}
    return SamplingParams(**knobs, **base), knobs


def messages_for(mode: str, task, components: dict) -> tuple[list[dict], str]:
    """(chat messages, assistant pre-fill) for a task under a mode."""
    from evolve.env.render import render_messages

    if mode != "maker-greedy":
        return render_messages(components, task), ""
    user = f"{MAKER_INSTRUCTION}\n```\n{task.prompt.strip()}\n```"
    return [{"role": "user", "content": user}], f"{MAKER_RESPONSE}\n```python\n"


def load_tasks(split: str) -> list:
    from evolve.gym.chat import load_chat_suite

    parts = load_chat_suite("humaneval-chat", 0, 0.25)
    tasks = parts["heldout"] if split == "heldout" else parts["train"] + parts["heldout"]
    return sorted(tasks, key=lambda t: int(t.task_id.split("/")[1]))


def done_keys(out: Path) -> set[tuple[str, int]]:
    if not out.exists():
        return set()
    return {(r["task_id"], r["sample"]) for r in map(json.loads, out.read_text().splitlines()) if r}


def parse_job(text: str) -> tuple[str, str, int]:
    """'greedy:all:1' -> (mode, split, samples); a bad one is a one-line exit."""
    try:
        mode, split, samples = text.split(":")
        if mode in MODES and split in ("all", "heldout") and int(samples) >= 1:
            return mode, split, int(samples)
    except ValueError:
        pass
    raise SystemExit(f"humaneval_sample: --job wants MODE:SPLIT:SAMPLES (MODE in {MODES}, SPLIT all|heldout), got {text!r}")


def run_job(llm, tok, spec, genconfig: dict, components: dict, job: tuple[str, str, int], args) -> None:
    from evolve.policy.chat import eos_ids, render_prompt

    mode, split, samples = job
    out = args.out_dir / f"qwen{args.model}-{mode}-{split}.jsonl"
    tasks = [t for t in load_tasks(split)[:args.limit] if not args.only or t.task_id in args.only]
    done = done_keys(out)
    todo = [t for t in tasks if any((t.task_id, i) not in done for i in range(samples))]
    print(f"humaneval_sample: {args.model} {mode} {split} x{samples}: {len(todo)} of {len(tasks)} tasks to sample",
          flush=True)
    eos = eos_ids(tok)
    batch_size = max(1, args.rows // samples)
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        # The seed is the task's index in the split, so a resumed run draws what an unbroken one would.
        seed = args.seed + tasks.index(batch[0])
        params, knobs = mode_params(mode, spec, genconfig, samples, seed, eos)
        prompts = []
        for t in batch:
            msgs, prefill = messages_for(mode, t, components)
            prompts.append((render_prompt(tok, msgs) + prefill, prefill))
        t0 = time.perf_counter()
        outs = llm.generate([{"prompt_token_ids": tok(p, add_special_tokens=False)["input_ids"]} for p, _ in prompts],
                            params, use_tqdm=False)
        wall = time.perf_counter() - t0
        with out.open("a") as f:
            for t, (_, prefill), o in zip(batch, prompts, outs, strict=True):
                for i, c in enumerate(o.outputs):
                    f.write(json.dumps({"task_id": t.task_id, "model": args.model, "mode": mode, "sample": i,
                                        "seed": seed, "knobs": knobs, "prefill": prefill,
                                        "text": prefill + tok.decode(c.token_ids, skip_special_tokens=True),
                                        "new_tokens": len(c.token_ids), "finish_reason": c.finish_reason,
                                        "batch_wall_s": round(wall, 2), "loadavg": os.getloadavg()[0]}) + "\n")
        toks = sum(len(c.token_ids) for o in outs for c in o.outputs)
        print(f"  {mode} {split}: {start + len(batch)}/{len(todo)} tasks, {toks} new tokens in {wall:.0f} s "
              f"({toks / wall:.1f} tok/s, load {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(POLICIES), required=True)
    ap.add_argument("--job", action="append", required=True, help="MODE:SPLIT:SAMPLES, in order (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=64, help="rows (tasks x samples) per engine call, one append each")
    ap.add_argument("--kv-gib", type=float, default=4.0)
    ap.add_argument("--limit", type=int, default=None, help="only the first N tasks (a rate probe)")
    ap.add_argument("--only", type=lambda v: set(v.split(",")), default=None, help="only these task ids (comma-separated; every job)")
    ap.add_argument("--out-dir", type=Path, default=REPO / "runs" / "he_grading")
    args = ap.parse_args()
    jobs = [parse_job(j) for j in args.job]
    from evolve.policy.backends.vllm_backend import engine_dtype, engine_kwargs, single_process_dist_env
    from evolve.policy.model_io import load_tokenizer, resolve_model_path

    spec = load_spec(args.model, args.kv_gib)
    path = resolve_model_path(spec)
    tok = load_tokenizer(path)
    genconfig = model_generation_config(path)
    components = tomllib.loads((REPO / "prompts" / "humaneval.toml").read_text())["components"]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    single_process_dist_env()
    from vllm import LLM

    llm = LLM(**engine_kwargs(spec, path, engine_dtype(spec, None), on_cpu=True))
    for job in jobs:
        run_job(llm, tok, spec, genconfig, components, job, args)


if __name__ == "__main__":
    main()
