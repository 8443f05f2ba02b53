"""Top-p (nucleus) sampling without sorting the vocabulary: the HF backend's draw.

transformers' ``TopPLogitsWarper`` sorts each row's whole vocabulary at every step, and ``generate`` then
draws with ``torch.multinomial`` over the whole vocabulary. For 32 rows of Qwen's 151,936-token vocabulary
on these CPUs that was 0.7 s a step for the sort and 0.14 s for the draw (2 threads, measured beside another
job), several times the 0.5B's own forward: it, not the model, set the HF backend's tokens/s (with this draw:
7.3x the float32 baseline instead of 3.2x, benchmarks/results/generate.json).

``nucleus_draw`` keeps transformers' rule (a token stays unless the tokens ranked below it hold at most
1 - top_p of the mass, i.e. the mass ranked strictly above it is below top_p; the top token always stays)
but finds the nucleus with ``topk``: k starts small and doubles until the k-th token is outside the nucleus
(a flat row, such as a random model's, ends at the whole vocabulary: a full sort, as before). The draw is a
multinomial over the nucleus only, with the global torch RNG (the backend seeds and forks it per stream).

The kept set is transformers' up to float rounding at the boundary (the mass is summed from the top here,
from the bottom there). The samples are not: the draw consumes the RNG differently, so the same seed gives
other tokens than the sort-based path did. So the draw is chosen per policy (``default_sampler``) and
recorded in its checkpoint's ``resolved`` facts as ``sampler``: checkpoints that record none were drawn by
transformers and keep that draw.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

SAMPLER = "nucleus-topk"  # recorded per checkpoint (policy.json's "resolved"); see default_sampler
TRANSFORMERS = "transformers"  # generate's own warpers and multinomial
FIRST_K = 64  # a code model at T 0.7 / top-p 0.95 keeps a handful of tokens; one topk call covers it
# Below this many tokens the sort costs well under a millisecond a step, and the models that small (the
# embedded gym model: 512; the tests' random models: 320) keep transformers' draw, so their recorded runs,
# fingerprints and figures stay reproducible by the current code.
NUCLEUS_MIN_VOCAB = 4096


def default_sampler(model) -> str:
    """The draw for a fresh policy: NucleusSampler for a large vocabulary, transformers' otherwise. A checkpoint
    keeps the draw its run used (``load_policy``), so a resume continues as the run went straight through."""
    vocab = model.get_output_embeddings().weight.shape[0]
    return SAMPLER if vocab >= NUCLEUS_MIN_VOCAB else TRANSFORMERS


def nucleus(logprobs: torch.Tensor, top_p: float) -> tuple[torch.Tensor, ...]:
    """Each row's nucleus, from its log-probs (log softmax(logits / temperature)), as (token ids, their
    probabilities, in the nucleus or not), all (B, k) and ranked by probability; k grows until every row's
    nucleus ends inside it. top_p >= 1 keeps the whole vocabulary (transformers adds no top-p warper then)."""
    vocab = logprobs.shape[-1]
    k = min(FIRST_K, vocab) if top_p < 1.0 else vocab
    while True:
        top, index = logprobs.topk(k, dim=-1)  # descending
        probs = top.exp()
        above = torch.nn.functional.pad(torch.cumsum(probs, dim=-1)[:, :-1], (1, 0))  # mass ranked above
        keep = above < top_p if top_p < 1.0 else torch.ones_like(probs, dtype=torch.bool)
        keep[:, 0] = True
        if k == vocab or not bool(keep[:, -1].any()):
            return index, probs, keep
        k = min(2 * k, vocab)


def nucleus_draw(logprobs: torch.Tensor, top_p: float) -> torch.Tensor:
    """(B,) token ids drawn from each row's distribution (given as log-probs) restricted to its top-p nucleus."""
    if top_p >= 1.0:  # no nucleus: one draw over the whole vocabulary, no ranking needed
        return torch.multinomial(logprobs.exp(), 1).squeeze(-1)
    index, probs, keep = nucleus(logprobs, top_p)
    return index.gather(-1, torch.multinomial(probs * keep, 1)).squeeze(-1)


class NucleusSampler(LogitsProcessor):
    """Draws each row's next token and returns scores whose only finite entry is that token, so a greedy
    ``generate`` (``do_sample=False``) takes it. ``record``: the ``SampledLogprobs`` that runs just before it,
    whose ``last`` is this step's log softmax(logits / T), the behaviour log-probs: the draw uses the same
    tensor instead of computing a second full-vocabulary log-softmax each step."""

    def __init__(self, record, top_p: float):
        self.record = record
        self.top_p = top_p

    def __call__(self, input_ids, scores):
        token = nucleus_draw(self.record.last, self.top_p)
        chosen = torch.full_like(scores, float("-inf"))
        return chosen.scatter_(1, token[:, None], 0.0)


def nucleus_mask_(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """vLLM's top-p filter (``apply_top_k_top_p_pytorch`` with no top-k) without its full-vocabulary sort:
    every token outside its row's nucleus is set to -inf in place, and ``logits`` is returned.

    The rule is vLLM's and transformers' (a token stays unless the tokens ranked below it hold at most
    1 - p of the mass: the mass ranked strictly above it is below p; the top token always stays), found with
    ``topk`` as ``nucleus`` finds it, k doubling until every row with p < 1 ends inside it; a row with
    p >= 1 is left whole. A token tied with the row's last kept one stays (vLLM's sort would keep some of a
    tie and not others), and the boundary mass is summed from the top (vLLM sums from the bottom): the kept
    sets agree up to float rounding there. vLLM then draws from these logits with its own seeded noise."""
    logprobs = logits.log_softmax(dim=-1, dtype=torch.float32)
    vocab = logits.shape[-1]
    narrowed = top_p < 1.0
    if not bool(narrowed.any()):
        return logits
    k = min(FIRST_K, vocab)
    while True:
        top, _ = logprobs.topk(k, dim=-1)  # descending
        above = torch.nn.functional.pad(torch.cumsum(top.exp(), dim=-1)[:, :-1], (1, 0))
        keep = above < top_p[:, None].to(above.dtype)
        keep[:, 0] = True
        if k == vocab or not bool((keep[:, -1] & narrowed).any()):
            break
        k = min(2 * k, vocab)
    last = top.gather(1, (keep.sum(dim=-1, keepdim=True) - 1))  # the smallest kept log-prob of each row
    last = last.masked_fill(~narrowed[:, None], float("-inf"))
    return logits.masked_fill_(logprobs < last, float("-inf"))
