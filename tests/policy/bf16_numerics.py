"""bf16 against float32 on one GRPO backward, shared by the real-model test (Qwen2.5-Coder-0.5B, where the CPU
has bf16 kernels) and the small-model test that runs on every CPU kind (tests/policy/test_bf16_numerics.py).

Each group pairs a correct answer (reward 1) with an unlike wrong one (reward 0): near-identical answers make
the GRPO gradient a difference of two almost equal sums, which no precision reproduces. Both dtypes start
from the same LoRA weights (copied from the float32 model: the adapter's random init is not
dtype-independent). The GRPO loss is 0 at ratio 1 with +-1 advantages, so the scalar compared is the
batch's mean completion log-prob (what the ratio is made of)."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def answer_groups(tokenizer, components: dict, tasks: Sequence, answers: Callable, max_tokens: int = 96) -> list:
    """One group per task: ``answers(task)`` gives [correct, wrong]; rewards 1 and 0."""
    from evolve.policy.chat import encode_prompt
    from evolve.prompt.candidate import render_messages
    from evolve.rollout import Rollout

    groups = []
    for gi, task in enumerate(tasks):
        text, ids = encode_prompt(tokenizer, render_messages(components, task))
        groups.append([Rollout(task_id=task.task_id, group=gi, sample_index=i, prompt_version="p", weights_version="w",
                               messages=[], prompt_text=text, completion=a, reward=float(i == 0), prompt_ids=list(ids),
                               completion_ids=tokenizer(a, add_special_tokens=False)["input_ids"][:max_tokens],
                               logprobs=[])
                       for i, a in enumerate(answers(task))])
    return groups


def logp_and_grad(spec, dtype: str, lora_state: dict | None, groups_of: Callable):
    """(mean completion log-prob, flat LoRA gradient, LoRA state) of one backward in ``dtype``."""
    import torch

    from evolve.policy import PolicySpec, load_policy
    from evolve.policy.updater import completion_logprobs

    policy = load_policy(PolicySpec.from_dict({**spec.model_dump(), "dtype": dtype, "device": "cpu"}))
    model = policy.model
    assert next(p for n, p in model.named_parameters() if "lora_" not in n).dtype == getattr(torch, dtype)
    lora = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if lora_state is None:
        lora_state = {n: p.detach().clone() for n, p in lora.items()}
    with torch.no_grad():
        for n, p in lora.items():
            p.copy_(lora_state[n])
    prep = policy.updater.prepare(groups_of(policy.tokenizer))
    policy.updater.backward_pass(prep)
    grad = torch.cat([lora[n].grad.float().reshape(-1) for n in sorted(lora) if lora[n].grad is not None])
    prompt, pmask, comp, cmask = prep.tensors[0]
    with torch.no_grad():
        logp = completion_logprobs(model, prompt, pmask, comp, cmask, spec.sampling.temperature).float()
    mean_logp = float((logp * cmask).sum() / cmask.sum())
    del policy, model
    return mean_logp, grad, lora_state


def bf16_against_float32(spec, groups_of: Callable) -> dict[str, float]:
    """Relative log-prob difference, LoRA-gradient cosine and gradient-norm relative difference."""
    import torch

    logp32, g32, state = logp_and_grad(spec, "float32", None, groups_of)
    logp16, g16, _ = logp_and_grad(spec, "bfloat16", state, groups_of)
    assert g32.norm() > 0 and g32.shape == g16.shape
    out = {"logp_rel": abs(logp16 - logp32) / abs(logp32),
           "grad_cos": float(torch.nn.functional.cosine_similarity(g32, g16, dim=0)),
           "grad_norm_rel": abs(float(g16.norm() / g32.norm()) - 1)}
    print(f"bf16 vs float32: mean completion log-prob {logp16:.5f} vs {logp32:.5f}, {out}")
    return out
