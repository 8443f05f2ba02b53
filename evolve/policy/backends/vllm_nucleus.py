"""vLLM's CPU top-p filter without its full-vocabulary sort (issue 36).

vLLM 0.32's CPU sampler (``TopKTopPSampler.forward_cpu``) filters top-p with
``apply_top_k_top_p_pytorch``, which sorts every row's whole vocabulary (Qwen's: 151,936 tokens) at every
step; without that sort 123 seeded rows of the 0.5B took 204 s instead of 304 s on 2 cores
(benchmarks/results/vllm_nucleus.json; the HF backend had the same cost in transformers' warper:
``evolve.policy.nucleus``, whose k-doubling search this repeats for per-row p). Here the filter is
``nucleus_mask_`` (topk, k doubling); vLLM's own seeded Gumbel draw then runs unchanged on the filtered
logits, so a seed draws the same tokens as with the sort, up to float rounding at the nucleus boundary.

Chosen per policy and recorded per checkpoint (``resolved["nucleus"]``, as the HF backend's ``sampler``):
a fresh CPU policy filters with topk; a checkpoint that records none was drawn with vLLM's sort and keeps
it, so a recorded run resumes and replays as it went. The wrapper is installed once per process around
vLLM's module function (the name ``forward_cpu`` looks up at call time) and applies only to CPU tensors
with top-p and no top-k (the loop's draw); anything else goes to vLLM's own function. Not applied in the
``vllm serve`` server process (``vllm_server.py``), which runs vLLM's code as shipped.
"""

from __future__ import annotations

VLLM_SORT = "vllm-sort"  # vLLM's own filter (what every checkpoint recording none used)
TOPK = "nucleus-topk"  # evolve.policy.nucleus.nucleus_mask_
_mode = [VLLM_SORT]  # the filter of this process's engine steps
_calls = [0]  # engine steps filtered here (the vLLM tests read it)


def default_nucleus(on_cpu: bool) -> str:
    return TOPK if on_cpu else VLLM_SORT


def use(mode: str) -> None:
    """The filter the next engine steps of this process use (the backend sets it before each generate)."""
    if mode not in (VLLM_SORT, TOPK):
        raise ValueError(f"unknown vLLM nucleus filter {mode!r}")
    _install()
    _mode[0] = mode


def filtered_steps() -> int:
    return _calls[0]


def _install() -> None:
    from vllm.v1.sample.ops import topk_topp_sampler as sampler_ops

    if getattr(sampler_ops.apply_top_k_top_p, "evolve_wrapped", False):
        return
    stock = sampler_ops.apply_top_k_top_p

    def apply_top_k_top_p(logits, k, p):
        if _mode[0] == TOPK and k is None and p is not None and logits.device.type == "cpu":
            from evolve.policy.nucleus import nucleus_mask_

            _calls[0] += 1
            return nucleus_mask_(logits, p)
        return stock(logits, k, p)

    apply_top_k_top_p.evolve_wrapped = True  # type: ignore[attr-defined]
    sampler_ops.apply_top_k_top_p = apply_top_k_top_p
