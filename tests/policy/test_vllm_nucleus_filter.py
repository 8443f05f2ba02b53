"""The topk top-p filter the vLLM backend uses on CPU (evolve.policy.nucleus.nucleus_mask_, installed by
evolve/policy/backends/vllm_nucleus.py) against a slow reference: vLLM 0.32's own sort-based filter
(``apply_top_k_top_p_pytorch`` with top-p only), re-written here because vLLM is not in this venv.
The engine-level check (the same seeded draws through both) is tests/vllm_cpu/test_vllm_backend.py."""

from __future__ import annotations

import pytest
import torch

from evolve.policy.nucleus import nucleus_mask_


def vllm_sort_filter(logits: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    probs_sum = torch.cumsum(logits_sort.softmax(dim=-1), dim=-1)
    mask = probs_sum <= 1 - p.unsqueeze(dim=1)
    mask[:, -1] = False
    return logits.clone().scatter_(-1, logits_idx, logits_sort.masked_fill(mask, -float("inf")))


def near_boundary(logits: torch.Tensor, p: torch.Tensor, tol: float = 2e-6) -> torch.Tensor:
    """Rows where some token's mass-above is within ``tol`` of p: float rounding may decide those."""
    top = logits.softmax(dim=-1).sort(dim=-1, descending=True).values
    above = torch.cumsum(top, dim=-1) - top
    return ((above - p[:, None]).abs() < tol).any(dim=-1)


@pytest.mark.parametrize("vocab", [50, 5000, 151_936])
def test_the_kept_tokens_are_vllms(vocab):
    g = torch.Generator().manual_seed(vocab)
    rows = 64 if vocab < 100_000 else 6
    logits = torch.randn(rows, vocab, generator=g) * (torch.rand(rows, 1, generator=g) * 8)
    logits[: rows // 2, :3] += 15  # peaked rows (a code model's), the rest flat to very flat
    p = torch.rand(rows, generator=g) * 0.6 + 0.4
    p[0], p[-1] = 1.0, 0.0  # the whole vocabulary; only the top token
    ours, theirs = nucleus_mask_(logits.clone(), p), vllm_sort_filter(logits, p)
    exact = ~near_boundary(logits, p)
    assert exact.sum() >= rows - 4
    assert torch.equal(torch.isinf(ours)[exact], torch.isinf(theirs)[exact])
    kept = ~torch.isinf(ours)
    # rounding may move a row's boundary by a token, never more
    assert (kept.sum(-1) - (~torch.isinf(theirs)).sum(-1)).abs().max() <= 1
    assert torch.equal(ours[kept], logits[kept])  # kept logits untouched
    assert kept[0].all() and kept[-1].sum() == 1 and kept.sum(-1).min() >= 1


def test_a_batch_without_top_p_is_left_alone():
    logits = torch.randn(4, 300)
    assert torch.equal(nucleus_mask_(logits.clone(), torch.ones(4)), logits)
