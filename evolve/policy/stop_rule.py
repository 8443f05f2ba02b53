"""Where a completion ends before its eos: the stop rule every token-exposing backend shares.

Two sampling settings end a row early, on its decoded text (special tokens skipped):
- ``sampling.stop_after_code_block``: once the text holds two ``` fences (a chat model's explanation after
  its code is never scored, and on CPU it costs as much as the code);
- ``sampling.stop``: once the text holds one of the given strings, kept in the completion (an answer graded
  on a closing tag, such as CodeI/O's ``</answer>``, needs the tag).
The row ends at the smallest t whose prefix ``ids[:t]`` satisfies the rule, so the completion's ids and
log-probs are exactly what the row sampled up to that token. The HF backend checks the rule after every
step (``hf.StopRuleCriteria``); vLLM stops in the engine (a logits processor for the fences, its own stop
strings for ``stop``) and the row is cut after generation with ``StopRule.end``.
"""

from __future__ import annotations

from dataclasses import dataclass

FENCE = "```"


@dataclass(frozen=True)
class StopRule:
    code_block: bool = False
    strings: tuple[str, ...] = ()

    @classmethod
    def of(cls, sampling) -> StopRule | None:
        """The rule a ``SamplingSpec`` sets, or None when it sets none."""
        rule = cls(bool(sampling.stop_after_code_block), tuple(sampling.stop))
        return rule if rule.code_block or rule.strings else None

    def met_by_text(self, text: str) -> bool:
        return (self.code_block and text.count(FENCE) >= 2) or any(s in text for s in self.strings)

    def met(self, tokenizer, ids) -> bool:
        return self.met_by_text(tokenizer.decode(list(ids), skip_special_tokens=True))

    def end(self, tokenizer, ids: list[int]) -> int | None:
        """The smallest t such that ``ids[:t]`` meets the rule, or None. A prefix decodes to a prefix of the
        text (an incomplete UTF-8 tail aside, which decodes to U+FFFD and so completes no fence and no stop
        string), so whether the rule is met only changes once as t grows: binary search, about log2(len)
        decodes."""
        if not self.met(tokenizer, ids):
            return None
        lo, hi = 1, len(ids)  # met(ids[:hi]) holds
        while lo < hi:
            mid = (lo + hi) // 2
            if self.met(tokenizer, ids[:mid]):
                hi = mid
            else:
                lo = mid + 1
        return hi


CODE_BLOCK = StopRule(code_block=True)
