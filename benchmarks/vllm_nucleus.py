"""vLLM's CPU sampler with its top-p filter (a full-vocabulary sort every step) against the topk filter
(``evolve.policy.backends.vllm_nucleus``, issue 36): wall time and whether each seed drew the same tokens.

One vLLM CPU engine on Qwen2.5-Coder-0.5B (policies/qwen2.5-coder-0.5b-vllm-cpu.toml, bf16 where the CPU has
bf16 kernels), the loop's draw (T 0.7, top-p 0.95, 384 new tokens, stop after the code block), the seed
prompt on the first TASKS training problems of humaneval-chat, one seeded request each (the headroom probe's
seeds), sent as one engine call; the filters alternate ROUNDS times in one process (the first call of each
filter is not dropped: both have been warmed by the engine's own start-up run).

    .venv-vllm/bin/python benchmarks/vllm_nucleus.py --tasks 123 --rounds 1

Writes benchmarks/results/vllm_nucleus.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=123)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    from headroom import SEED_PROMPT, load_train_tasks, loop_draw, request_seed
    from humaneval_sample import load_spec

    from evolve.env.render import render_messages
    from evolve.policy.backends import vllm_nucleus
    from evolve.policy.backends.vllm_backend import engine_dtype, engine_kwargs, single_process_dist_env
    from evolve.policy.chat import eos_ids, render_prompt
    from evolve.policy.model_io import load_tokenizer, resolve_model_path

    spec = load_spec("0.5b", 4.0)
    path = resolve_model_path(spec)
    tok = load_tokenizer(path)
    single_process_dist_env()
    from vllm import LLM

    llm = LLM(**engine_kwargs(spec, path, engine_dtype(spec, None), on_cpu=True))
    seed = tomllib.loads(SEED_PROMPT.read_text())["components"]
    tasks = load_train_tasks()[:args.tasks]
    prompts = [{"prompt_token_ids": tok(render_prompt(tok, render_messages(seed, t)), add_special_tokens=False)["input_ids"]}
               for t in tasks]
    eos = eos_ids(tok)
    params = [loop_draw(spec, eos, request_seed(0, i, 0)) for i in range(len(tasks))]
    walls: dict[str, list[float]] = {vllm_nucleus.TOPK: [], vllm_nucleus.VLLM_SORT: []}
    draws: dict[str, list[list[int]]] = {}
    tokens: dict[str, int] = {}
    for r in range(args.rounds):
        for mode in (vllm_nucleus.TOPK, vllm_nucleus.VLLM_SORT) if r % 2 == 0 else (vllm_nucleus.VLLM_SORT, vllm_nucleus.TOPK):
            vllm_nucleus.use(mode)
            llm.reset_prefix_cache()
            t0 = time.perf_counter()
            outs = llm.generate(prompts, params, use_tqdm=False)
            walls[mode].append(time.perf_counter() - t0)
            draws[mode] = [list(o.outputs[0].token_ids) for o in outs]
            tokens[mode] = sum(map(len, draws[mode]))
            print(f"  {mode}: {tokens[mode]} tokens in {walls[mode][-1]:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    same = sum(a == b for a, b in zip(draws[vllm_nucleus.TOPK], draws[vllm_nucleus.VLLM_SORT], strict=True))
    sort_s, topk_s = min(walls[vllm_nucleus.VLLM_SORT]), min(walls[vllm_nucleus.TOPK])
    figures = {"requests": len(tasks), "identical_draws": same, "identical_share": round(same / len(tasks), 4),
               "sort_s": round(sort_s, 1), "topk_s": round(topk_s, 1), "speedup": round(sort_s / topk_s, 2),
               "sort_tokens_per_s": round(tokens[vllm_nucleus.VLLM_SORT] / sort_s, 1),
               "topk_tokens_per_s": round(tokens[vllm_nucleus.TOPK] / topk_s, 1)}
    write_results("vllm_nucleus", args=vars(args), results={"walls": walls, "tokens": tokens},
                  figures=figures, machine=machine_facts(threads="vLLM's OpenMP on both cores", dtype=spec.dtype))
    print_figures(figures)


if __name__ == "__main__":
    main()
