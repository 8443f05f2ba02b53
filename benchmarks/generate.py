"""The rollout backend and the update on the real model (SmolLM2-135M-Instruct, float32, 1 CPU thread).

1. Generation: tokens/s of evolve's hf backend (behaviour log-probs from the step logits, as the loop
   samples) vs plain ``model.generate`` on the same model, the same left-padded batch, the same
   sampling settings and seed, at the loop's batch shape (configs/smollm2.toml: 4 tasks x G=4).
   The two alternate ``--reps`` times; medians. The code-block stop is off on both sides, so both
   produce the same tokens (checked) and the ratio is the backend's own per-token cost.
2. Update: one GRPO step, update only (no generation, no verification), evolve's Updater vs TRL 1.16
   GRPOTrainer's own compute_loss + backward + AdamW step, on copies of the same model and the same
   batch (the samples of part 1, rewards alternating 1/0 inside each group so every group trains;
   advantages as TRL computes them). Full fine-tuning on both sides; one micro-batch.

    .venv/bin/python benchmarks/generate.py [--tokens 48] [--reps 2]

Prints name=value figures last and writes benchmarks/results/generate.json.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
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
from results_io import print_figures, write_results  # noqa: E402


def setup(tokens: int, tasks: int, g: int):
    from evolve.gym.chat import load_chat_suite
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt import load_seed_prompt
    from evolve.prompt.candidate import render_messages

    base = PolicySpec.from_toml(REPO / "policies" / "smollm2-135m-instruct.toml").model_dump()
    base.update(finetune="full", device="cpu")
    base["sampling"].update(max_new_tokens=tokens, stop_after_code_block=False, chunk_size=tasks * g)
    base["grpo"].update(advantage="grpo", loss_type="grpo", micro_batch_size=tasks * g, eps=1e-4,
                        skip_zero_variance=False, epsilon_low=0.2, epsilon_high=0.2)
    spec = PolicySpec.from_dict(base)
    comp = dict(load_seed_prompt(REPO / "prompts" / "chat-coder.toml").components)
    msgs = [render_messages(comp, t) for t in load_chat_suite("tiny-coder-chat")["train"][:tasks]]
    return spec, load_policy(spec), msgs


def plain_generate(policy, msgs, g: int, seed: int):
    import torch

    from evolve.policy.chat import encode_prompt, eos_ids

    s, tok, model = policy.spec.sampling, policy.tokenizer, policy.model
    ids = [encode_prompt(tok, m)[1] for m in msgs for _ in range(g)]
    width = max(map(len, ids))
    pad = tok.pad_token_id
    inp = torch.tensor([[pad] * (width - len(x)) + x for x in ids])
    att = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = model.generate(input_ids=inp, attention_mask=att, do_sample=True, temperature=s.temperature,
                             top_p=s.top_p, top_k=0, max_new_tokens=s.max_new_tokens,
                             eos_token_id=eos_ids(tok, model), pad_token_id=pad)
    comp = out[:, width:]
    eos = set(eos_ids(tok, model))
    lens = []
    for row in comp.tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        lens.append(end)
    return [row[:n] for row, n in zip(comp.tolist(), lens, strict=True)]


def bench_generation(policy, msgs, g: int, reps: int) -> dict:
    ours_s, plain_s, ours_tok, plain_tok, same = [], [], [], [], True
    for rep in range(reps):
        t0 = time.perf_counter()
        samples = policy.generate(msgs, n=g, seed=rep)
        ours_s.append(time.perf_counter() - t0)
        ours_ids = [s.completion_ids for grp in samples for s in grp]
        ours_tok.append(sum(map(len, ours_ids)))
        t0 = time.perf_counter()
        plain_ids = plain_generate(policy, msgs, g, rep)
        plain_s.append(time.perf_counter() - t0)
        plain_tok.append(sum(map(len, plain_ids)))
        same &= plain_ids == ours_ids
    ours_tps = statistics.median(t / s for t, s in zip(ours_tok, ours_s, strict=True))
    plain_tps = statistics.median(t / s for t, s in zip(plain_tok, plain_s, strict=True))
    # Per-rep ratios too: the pair of runs in one rep shares the machine's load (others' jobs come and go).
    paired = [(ot / os_) / (pt / ps) for ot, os_, pt, ps in zip(ours_tok, ours_s, plain_tok, plain_s, strict=True)]
    return {"ours_seconds": ours_s, "plain_seconds": plain_s, "ours_tokens": ours_tok, "plain_tokens": plain_tok,
            "paired_ratios": paired,
            "ours_tokens_per_s": ours_tps, "plain_tokens_per_s": plain_tps, "same_tokens": same,
            "last_samples": samples}


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
                      learning_rate=2e-5, max_grad_norm=1.0)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--g", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    import tempfile

    import torch
    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore")
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    spec, policy, msgs = setup(args.tokens, args.tasks, args.g)
    gen = bench_generation(policy, msgs, args.g, args.reps)
    groups = rollouts(gen.pop("last_samples"))
    trl_model = copy.deepcopy(policy.model)
    t0 = time.perf_counter()
    stats = policy.update(groups)
    ours_update = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        trl_update = trl_update_seconds(trl_model, policy.tokenizer, groups, args.g, args.tokens, Path(tmp))
    results = {**gen, "ours_update_s": ours_update, "trl_update_s": trl_update,
               "update_stats": stats.to_dict(), "model": spec.model, "finetune": "full",
               "batch": f"{args.tasks}x{args.g}", "max_new_tokens": args.tokens, "threads": 1}
    figures = {
        "gen_ours_tokens_per_s": round(gen["ours_tokens_per_s"], 2),
        "gen_plain_tokens_per_s": round(gen["plain_tokens_per_s"], 2),
        "gen_ratio_vs_plain_generate": round(gen["ours_tokens_per_s"] / gen["plain_tokens_per_s"], 3),
        "update_ours_s": round(ours_update, 2),
        "update_trl_s": round(trl_update, 2),
        "update_ratio_vs_trl": round(ours_update / trl_update, 3),
    }
    print(f"SmolLM2-135M float32, 1 thread, batch {args.tasks}x{args.g}, {args.tokens} new tokens max; "
          f"identical tokens from both generators: {gen['same_tokens']}")
    write_results("generate", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
