"""HF transformers generation: batched, left-padded, KV-cached, with behaviour log-probs.

All prompts x n samples go through one ``generate`` call per chunk of ``chunk_size`` rows. The
behaviour log-probs are log softmax(logits / T) of the sampled token, in float32, from the raw
logits of each step, without a second forward and without keeping every step's full-vocabulary
logits (``output_logits`` held B x T x V floats: 7.5 GB for 32 x 384 tokens of a 151,936 vocab,
and as much again for their log-softmax). ``SampledLogprobs`` keeps one B x V log-softmax at a
time: at step t it reads the token sampled at step t-1 from ``input_ids[:, -1]`` and keeps only
that token's log-prob; the last token is resolved after ``generate`` returns.

The draw: transformers' top-p warper and multinomial for small vocabularies, ``NucleusSampler`` (the same
distribution without sorting the vocabulary every step) for large ones; a checkpoint keeps its run's draw
(``evolve.policy.nucleus``).

A task's samples share its prompt: with ``prefill = "shared-prompt"`` (models of ``SHARED_PREFILL_MIN_PARAMS``
or more) each distinct prompt of a chunk is run through the model once and its KV rows are copied to its
samples (``DynamicCache.batch_select_indices``) before ``generate`` goes on from the prompt's last token, as
transformers' prefix-reuse recipe does; n samples a task cost one prompt forward instead of n. The last
prompt token is then computed against the cache rather than inside the full prefill, so logits differ from
the batch path by float rounding and the same seed can draw other tokens: the prefill is recorded per
checkpoint (``resolved["prefill"]``) beside the draw, and checkpoints recording none keep the batch path.

With ``stop_after_code_block`` or ``stop`` strings a row ends at the token that meets the stop rule
(``evolve.policy.stop_rule``: its first closed code block, a stop string; finish_reason "stop", not
truncated); the rest of that row (generated while other rows of the
batch went on) is cut off, so completion ids and log-probs are exactly what the row sampled.
"""

from __future__ import annotations

import torch
from transformers import (
    DynamicCache,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
)

from evolve.policy.chat import encode_prompt, eos_ids
from evolve.policy.heap import tune_heap
from evolve.policy.nucleus import SAMPLER, NucleusSampler, default_sampler
from evolve.policy.sample import Sample
from evolve.policy.spec import SamplingSpec
from evolve.policy.stop_rule import StopRule

SHARED_PROMPT = "shared-prompt"  # recorded per checkpoint (policy.json's "resolved"); see default_prefill
BATCH = "batch"  # every row's prompt through the model in the batch, as generate does by itself
# Below this many parameters (the embedded gym model: 0.9M; the tests' random models) a forward costs less than
# the extra call, and those models keep the batch path, so their recorded runs and figures stay reproducible.
SHARED_PREFILL_MIN_PARAMS = 10_000_000


def default_prefill(model) -> str:
    """The prefill of a fresh policy; a checkpoint keeps its run's (``load_policy``)."""
    return SHARED_PROMPT if sum(p.numel() for p in model.parameters()) >= SHARED_PREFILL_MIN_PARAMS else BATCH


def task_seed(seed: int, task_index: int) -> int:
    """The seed of one task's stream under ``seed_scope = "task"`` (numpy's SeedSequence mixing)."""
    import numpy as np

    return int(np.random.SeedSequence([seed, task_index]).generate_state(1)[0])


class StopRuleCriteria(StoppingCriteria):
    """Stops each row once its completion meets the sampling's ``StopRule``; remembers where (completion length)."""

    def __init__(self, tokenizer, rule: StopRule, prompt_width: int, rows: int):
        self.tokenizer = tokenizer
        self.rule = rule
        self.width = prompt_width
        self.stop_at: list[int | None] = [None] * rows

    def __call__(self, input_ids, scores, **kwargs):
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for r in range(input_ids.shape[0]):
            if self.stop_at[r] is None:
                if self.rule.met(self.tokenizer, input_ids[r, self.width:].tolist()):
                    self.stop_at[r] = input_ids.shape[1] - self.width
            done[r] = self.stop_at[r] is not None
        return done


class SampledLogprobs(LogitsProcessor):
    """Records log softmax(scores / T) of each sampled token, holding one (B, V) tensor at a time.

    transformers runs custom processors after the model's own pre-warper processors and before the
    temperature/top-p warpers, so ``scores`` are the raw logits whenever the generation config adds
    no pre-warper processor (``HFBackend`` switches those off): the numbers ``output_logits`` gave.
    Returns ``scores`` untouched, so sampling is unchanged; it runs before ``NucleusSampler`` where that draws.
    """

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.picked: list[torch.Tensor] = []  # picked[t]: (B,) log-prob of the token sampled at step t
        self.last: torch.Tensor | None = None  # (B, V) log-softmax of the latest step

    def __call__(self, input_ids, scores):
        if self.last is not None:
            self.picked.append(self.last.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.last = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def logprobs(self, completions: torch.Tensor) -> torch.Tensor:
        """(B, T) log-probs of ``completions`` (the generated ids). Steps generate undid at the end
        (deferred stop checks) were called but are not in ``completions``: they are dropped."""
        steps = completions.shape[1]
        picked = self.picked[:steps]
        if len(picked) < steps:
            picked.append(self.last.gather(-1, completions[:, -1:].to(self.last.device)).squeeze(-1))
        self.last = None
        if not picked:
            return torch.zeros(completions.shape, dtype=torch.float32)
        return torch.stack(picked, dim=1).cpu()


# Generation-config fields that make transformers add a logits processor ahead of custom ones; with
# any of them the scores SampledLogprobs sees would not be the raw logits the trainer's ratio uses.
_PRE_WARPERS = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0,
                "bad_words_ids": None, "min_length": 0, "min_new_tokens": None, "forced_bos_token_id": None,
                "forced_eos_token_id": None, "suppress_tokens": None, "begin_suppress_tokens": None,
                "sequence_bias": None, "exponential_decay_length_penalty": None, "guidance_scale": None,
                "renormalize_logits": False}


def neutral_pre_warpers(model) -> dict:
    """``generate`` overrides that switch off the pre-warper processors the model's generation config
    asks for (a hub config's repetition_penalty = 1.1, say): the loop samples from softmax(logits / T)
    with top-p, the distribution its log-probs and its update describe."""
    cfg = getattr(model, "generation_config", None)
    out = {}
    for name, neutral in _PRE_WARPERS.items():
        value = getattr(cfg, name, neutral)
        if value is not None and value != neutral:
            out[name] = neutral
    return out


class HFBackend:
    name = "hf"
    exposes_tokens = True

    def __init__(self, model, tokenizer, sampling: SamplingSpec):
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.eos = eos_ids(tokenizer, model)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos[0]
        self.neutral = neutral_pre_warpers(model)
        # How a row's next token is drawn: load_policy replaces it with what a checkpoint recorded.
        self.sampler = default_sampler(model)
        self.prefill = default_prefill(model)  # likewise replaced by a checkpoint's recorded one
        tune_heap()  # evolve.policy.heap: per-step buffers neither stay resident nor fault back in

    def sync_weights(self, model) -> None:  # generation runs on the trained model itself
        self.model = model

    def begin_generation(self) -> None:  # nothing is cached between calls
        pass

    def close(self) -> None:
        pass

    @torch.no_grad()
    def generate(self, prompts: list[list[dict]], n: int, seed: int, first_task: int = 0) -> list[list[Sample]]:
        """``first_task``: index of ``prompts[0]`` in the caller's whole batch (a worker's shard starts
        there), which keys the per-task streams of ``seed_scope = "task"``."""
        encoded = [encode_prompt(self.tokenizer, m) for m in prompts]
        rows = [(i, text, ids) for i, (text, ids) in enumerate(encoded) for _ in range(n)]
        out: list[list[Sample]] = [[] for _ in prompts]
        was_training = self.model.training
        self.model.eval()
        # A private RNG stream: the same seed gives the same samples, and the caller's RNG is untouched.
        with torch.random.fork_rng(devices=[]):
            if self.sampling.seed_scope == "task":  # one stream per task: independent of the split
                streams = [(task_seed(seed, first_task + i), rows[i * n:(i + 1) * n]) for i in range(len(prompts))]
            else:
                streams = [(seed, rows)]
            step = self.sampling.chunk_size
            for stream_seed, stream in streams:
                torch.manual_seed(stream_seed)
                for start in range(0, len(stream), step):
                    for i, sample in self._generate_chunk(stream[start:start + step]):
                        out[i].append(sample)
        if was_training:
            self.model.train()
        return out

    def _generate_chunk(self, rows):
        s = self.sampling
        width = max(len(ids) for _, _, ids in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (_, _, ids) in enumerate(rows):
            input_ids[r, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[r, width - len(ids):] = 1
        device = next(self.model.parameters()).device
        rule = StopRule.of(s)
        stop = StopRuleCriteria(self.tokenizer, rule, width, len(rows)) if rule is not None else None
        record = SampledLogprobs(s.temperature)
        processors = [record]
        if self.sampler == SAMPLER:  # the draw is NucleusSampler's; greedy generate takes its one finite score
            processors.append(NucleusSampler(record, s.top_p))  # (and ignores a hub config's own sampling)
            draw = {"do_sample": False}
        else:
            draw = {"do_sample": True, "temperature": s.temperature, "top_p": s.top_p, "top_k": 0}
        input_ids, attention = input_ids.to(device), attention.to(device)
        cache = self._shared_prompt_cache(rows, input_ids, attention) if self.prefill == SHARED_PROMPT else None
        sequences = self.model.generate(
            input_ids=input_ids, attention_mask=attention, **draw, **({"cache": cache} if cache is not None else {}),
            max_new_tokens=s.max_new_tokens, eos_token_id=self.eos, pad_token_id=self.pad_id, use_cache=True,
            logits_processor=LogitsProcessorList(processors), **self.neutral,
            stopping_criteria=StoppingCriteriaList([stop]) if stop is not None else None,
        )
        completions = sequences[:, width:]
        logps = record.logprobs(completions)
        completions = completions.cpu()
        eos = torch.tensor(self.eos)
        for r, (i, text, ids) in enumerate(rows):
            toks = completions[r].tolist()
            hits = torch.isin(completions[r], eos).nonzero()
            end = int(hits[0]) + 1 if len(hits) else len(toks)
            truncated = not len(hits)
            if stop is not None and stop.stop_at[r] is not None and stop.stop_at[r] <= end:
                end, truncated = stop.stop_at[r], False  # met the stop rule: a stop, not a cut
            yield i, Sample(
                text=self.tokenizer.decode(toks[:end], skip_special_tokens=True),
                prompt_text=text, prompt_ids=list(ids), completion_ids=toks[:end],
                logprobs=logps[r, :end].tolist(), truncated=truncated,
                finish_reason="length" if truncated else "stop",
            )

    def _shared_prompt_cache(self, rows, input_ids, attention) -> DynamicCache | None:
        """The chunk's KV cache of every prompt but its last token, each distinct prompt computed once and
        copied to its rows; None where no prompt repeats (nothing to share). Rows of one prompt are adjacent."""
        firsts: list[int] = []
        index: list[int] = []
        for r, (i, _, _) in enumerate(rows):
            if not firsts or rows[firsts[-1]][0] != i:
                firsts.append(r)
            index.append(len(firsts) - 1)
        if len(firsts) == len(rows) or input_ids.shape[1] < 2:
            return None
        ids, mask = input_ids[firsts, :-1], attention[firsts, :-1]
        # generate's own position ids for left-padded rows (_prepare_position_ids_for_generation)
        position = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
        cache = DynamicCache(config=self.model.config)
        self.model(input_ids=ids, attention_mask=mask, position_ids=position, cache=cache,
                   use_cache=True, logits_to_keep=1)
        cache.batch_select_indices(torch.tensor(index, device=input_ids.device))
        return cache
