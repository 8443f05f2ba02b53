"""``stop_after_code_block`` inside vLLM's engine: a V1 batch-level logits processor (vLLM 0.32's
``vllm.v1.sample.logits_processor`` interface) that forces a row's eos once its output has closed its first
``` block, so the engine stops spending steps on the explanation. vLLM's own ``stop`` strings cannot say
"the second fence" (the opening fence would stop it). Which token ends the row is decided after generation
by ``evolve.policy.stop_rule.StopRule.end``, the HF backend's rule: the forced eos and anything the
engine sampled past the fence are cut off. A request opts in through ``SamplingParams.extra_args``.
"""

from __future__ import annotations

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from evolve.policy.stop_rule import CODE_BLOCK, FENCE

EXTRA_ARG = "evolve_code_block_eos"  # extra_args key: the eos id to force once the block is closed


class _Row:
    def __init__(self, output_ids: list[int], eos: int):
        self.out = output_ids  # vLLM's live list of this request's output ids
        self.eos = eos
        self.seen = 0
        self.text = ""
        self.closed = False


class CodeBlockStopProcessor(LogitsProcessor):
    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(vllm_config.model_config.tokenizer)
        self.rows: dict[int, _Row] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it forces a token

    @staticmethod
    def _new_row(params, _prompt_ids, output_ids):
        eos = (params.extra_args or {}).get(EXTRA_ARG)
        return None if eos is None else _Row(output_ids, int(eos))

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self.rows, batch_update, self._new_row)
        for row in self.rows.values():
            if row.closed:
                continue
            end = row.seen
            while end < len(row.out) and row.out[end] >= 0:  # stop at a placeholder of a token not yet known
                end += 1
            new, row.seen = row.out[row.seen:end], end
            if new:
                row.text += self.tokenizer.decode(new, skip_special_tokens=True)
                # the running text is a cheap test; the whole decode is the rule (StopRule.end's)
                row.closed = row.text.count(FENCE) >= 2 and CODE_BLOCK.met(self.tokenizer, row.out)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, row in self.rows.items():
            if row.closed and index < logits.shape[0]:
                logits[index] = float("-inf")
                logits[index, row.eos] = 0.0
        return logits
