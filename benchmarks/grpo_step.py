"""Seconds per GRPO step: evolve's policy vs TRL GRPOTrainer, same tiny model, same batch, same run.

Two figures per shape (PROMPTSxG), both against TRL measured in the same process:
- **update only**: the loss, backward and optimizer step on already generated and scored completions.
  evolve: ``policy.update``. TRL: its step (callback to callback) minus ``_prepare_inputs``, which is
  where TRL generates, scores and builds the batch.
- **whole step**: generation + reward (verification) + update.
The reward in both is the same sandboxed verifier on gym tasks. Both sides train every group
(``skip_zero_variance = False`` here, so the two do the same work; the shipped specs skip
zero-variance groups, which only makes evolve's update cheaper).
The model is a random ~100k-parameter Qwen2 with a byte-level BPE tokenizer (built offline), so
almost every completion runs to max_new_tokens: both sides generate the same number of tokens.

    .venv/bin/python benchmarks/grpo_step.py [--steps 8] [--configs 4x4,8x8] [--tokens 32]

Prints a table, then the headline figures last as name=value lines, and writes
``benchmarks/results/grpo_step.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402


def make_verifier():
    from evolve.verification import Verifier

    return Verifier(None, jobs=2)


def reward_fn(verifier):
    def rewards(pairs):
        return [r.reward for r in verifier.verify_batch(pairs)]

    return rewards


def bench_ours(model_dir, tasks, g, tokens, steps, score):
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt.candidate import render_messages
    from evolve.rollout import Rollout

    spec = PolicySpec.from_dict({"model": str(model_dir), "sampling": {"max_new_tokens": tokens},
                                 "optimizer": {"lr": 1e-4}, "grpo": {"micro_batch_size": len(tasks) * g,
                                                                     "skip_zero_variance": False}})
    policy = load_policy(spec)
    messages = [render_messages({}, t) for t in tasks]
    rows = []
    for step in range(steps + 1):  # step 0 warms up
        t0 = time.perf_counter()
        samples = policy.generate(messages, n=g, seed=step)
        t1 = time.perf_counter()
        rewards = score([(t, s.text) for t, grp in zip(tasks, samples, strict=True) for s in grp])
        t2 = time.perf_counter()
        it = iter(rewards)
        groups = [[Rollout(task_id=t.task_id, group=i, sample_index=j, prompt_version="p", weights_version="w",
                           messages=messages[i], prompt_text=s.prompt_text, completion=s.text, reward=next(it),
                           prompt_ids=s.prompt_ids, completion_ids=s.completion_ids, logprobs=s.logprobs)
                   for j, s in enumerate(grp)] for i, (t, grp) in enumerate(zip(tasks, samples, strict=True))]
        policy.update(groups)
        t3 = time.perf_counter()
        if step:
            rows.append((t1 - t0, t2 - t1, t3 - t2))
    med = [statistics.median(r[i] for r in rows) for i in range(3)]
    total = statistics.median(sum(r) for r in rows)
    return {"generate": med[0], "verify": med[1], "update": med[2], "step": total,
            "raw_steps": [sum(r) for r in rows], "raw_updates": [r[2] for r in rows]}


def bench_trl(model_dir, tasks, g, tokens, steps, score, out_dir):
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    by_prompt = {t.prompt: t for t in tasks}

    def reward(prompts, completions, **kw):
        pairs = [(by_prompt[p[-1]["content"]], c[-1]["content"]) for p, c in zip(prompts, completions, strict=True)]
        return score(pairs)

    class Clock(TrainerCallback):
        def __init__(self):
            self.marks = []

        def on_step_begin(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

    args = GRPOConfig(
        output_dir=str(out_dir), bf16=False, use_cpu=True, report_to=[], max_steps=steps + 1,
        per_device_train_batch_size=len(tasks) * g, num_generations=g, max_completion_length=tokens,
        gradient_accumulation_steps=1, learning_rate=1e-4, beta=0.0, temperature=1.0, top_k=0,
        logging_steps=10_000, save_strategy="no", disable_tqdm=True, seed=0, dataloader_num_workers=0,
    )
    ds = Dataset.from_dict({"prompt": [[{"role": "user", "content": t.prompt}] for t in tasks] * (steps + 2)})
    clock = Clock()
    prepare: list[float] = []

    class Timed(GRPOTrainer):
        def _prepare_inputs(self, generation_batch):  # generation + reward + batch building, every step here
            t = time.perf_counter()
            try:
                return super()._prepare_inputs(generation_batch)
            finally:
                prepare.append(time.perf_counter() - t)

    trainer = Timed(model=str(model_dir), reward_funcs=reward, args=args, train_dataset=ds, callbacks=[clock])
    trainer.train()
    spans = [clock.marks[i + 1] - clock.marks[i] for i in range(0, len(clock.marks) - 1, 2)]
    if len(prepare) != len(spans):
        raise RuntimeError(f"TRL generated {len(prepare)} times in {len(spans)} steps: cannot split its step")
    steps_s = spans[1:]
    updates = [s - p for s, p in zip(spans[1:], prepare[1:], strict=True)]
    return {"step": statistics.median(steps_s), "update": statistics.median(updates),
            "generate_and_score": statistics.median(prepare[1:]), "raw_steps": steps_s, "raw_updates": updates}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--configs", default="4x4,8x8", help="PROMPTSxG, comma-separated")
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    import torch
    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore", category=FutureWarning)
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    from evolve.gym import load_gym
    from evolve.policy.randmodel import build_random_model

    verifier = make_verifier()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_random_model(Path(tmp) / "model", hidden=64, layers=2, vocab=512)
        n_params = sum(p.numel() for p in __import__("transformers").AutoModelForCausalLM
                       .from_pretrained(model_dir).parameters())
        with verifier:
            score = reward_fn(verifier)
            for cfg in args.configs.split(","):
                p, g = (int(x) for x in cfg.split("x"))
                tasks = load_gym("train", seed=0, n=p)
                ours = bench_ours(model_dir, tasks, g, args.tokens, args.steps, score)
                trl = bench_trl(model_dir, tasks, g, args.tokens, args.steps, score, Path(tmp) / f"trl-{cfg}")
                results.append((cfg, ours, trl))
    model = {"params": n_params, "kind": "random Qwen2", "hidden": 64, "layers": 2, "vocab": 512}
    print(f"model: random Qwen2, {n_params} params; {args.tokens} new tokens; {args.steps} timed steps (median); "
          f"reward: sandboxed Verifier; 1 torch thread")
    print(f"{'batch':>6} {'ours gen':>9} {'ours verify':>11} {'ours update':>11} {'TRL update':>10} "
          f"{'upd/TRL':>7} {'ours step':>9} {'TRL step':>8} {'step/TRL':>8}   (seconds, median)")
    figures: dict = {}
    for cfg, o, t in results:
        print(f"{cfg:>6} {o['generate']:>9.3f} {o['verify']:>11.3f} {o['update']:>11.3f} {t['update']:>10.3f} "
              f"{o['update'] / t['update']:>7.2f} {o['step']:>9.3f} {t['step']:>8.3f} {o['step'] / t['step']:>8.2f}")
        figures[f"update_ratio_vs_trl_{cfg}"] = round(o["update"] / t["update"], 3)
        figures[f"step_ratio_vs_trl_{cfg}"] = round(o["step"] / t["step"], 3)
        figures[f"ours_update_s_{cfg}"] = round(o["update"], 4)
        figures[f"trl_update_s_{cfg}"] = round(t["update"], 4)
        figures[f"ours_step_s_{cfg}"] = round(o["step"], 4)
        figures[f"trl_step_s_{cfg}"] = round(t["step"], 4)
    write_results("grpo_step", args=vars(args), figures=figures,
                  results={"model": model, "reward": "Verifier",
                           "skip_zero_variance": False,
                           "shapes": [{"shape": c, "ours": o, "trl": t} for c, o, t in results]})
    print_figures(figures)


if __name__ == "__main__":
    main()
