"""Where a chat completion closes its first fenced code block: the stop rule both local backends share.

A chat model's explanation after its code is never scored, and on CPU it costs as much as the code, so
``sampling.stop_after_code_block`` ends a row at the token whose decoded completion first holds two
``` fences. The HF backend checks it after every step (``CodeBlockStop``); vLLM ends the row in the engine
(``evolve.policy.backends.vllm_code_block``) and both cut the row with ``code_block_end``: the completion's
ids and log-probs are exactly what the row sampled up to that token.
"""

from __future__ import annotations

FENCE = "```"


def closes_block(tokenizer, ids) -> bool:
    return tokenizer.decode(list(ids), skip_special_tokens=True).count(FENCE) >= 2


def code_block_end(tokenizer, ids: list[int]) -> int | None:
    """The smallest t such that ``ids[:t]`` decodes to text with two fences, or None. A prefix decodes to a
    prefix of the text (an incomplete UTF-8 tail aside, which holds no backtick), so the count only grows
    with t: binary search, about log2(len) decodes."""
    if not closes_block(tokenizer, ids):
        return None
    lo, hi = 1, len(ids)  # closes_block(ids[:hi]) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if closes_block(tokenizer, ids[:mid]):
            hi = mid
        else:
            lo = mid + 1
    return hi
