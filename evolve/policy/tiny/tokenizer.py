"""A byte-level BPE tokenizer trained locally, in the Qwen2 pre-tokenizer pipeline.

transformers 5 rebuilds a ``Qwen2Tokenizer``'s normalizer and pre-tokenizer on
reload (NFC, Split with Qwen's regex, ByteLevel without regex), so the tokenizer
is trained in exactly that pipeline: a plain ByteLevel tokenizer would re-tokenize
differently after a save/load round trip.
"""

from __future__ import annotations

from collections.abc import Iterable

SYSTEM, USER, ASSISTANT, END, PAD = "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|pad|>"
SPECIAL_TOKENS = (PAD, END, SYSTEM, USER, ASSISTANT)

# Assistant turns end with <|end|> (the EOS), so generation stops on it.
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}{{ '<|assistant|>\n' + m['content'] + '<|end|>\n' }}"
    "{% else %}{{ '<|' + m['role'] + '|>\n' + m['content'] + '\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def render_chat(messages: list[dict]) -> str:
    """The chat template's output with ``add_generation_prompt=True``, in Python (for the corpus)."""
    parts = []
    for m in messages:
        if m["role"] == "assistant":
            parts.append(f"{ASSISTANT}\n{m['content']}{END}\n")
        else:
            parts.append(f"<|{m['role']}|>\n{m['content']}\n")
    return "".join(parts) + f"{ASSISTANT}\n"


def train_tokenizer(texts: Iterable[str], vocab_size: int, model_max_length: int):
    """Train the BPE on ``texts`` and wrap it as a transformers Qwen2Tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2,
    )
    tok.train_from_iterator(list(texts), trainer)
    model = tok.get_vocab(with_added_tokens=False)
    merges = [tuple(m) if not isinstance(m, str) else tuple(m.split(" ")) for m in _merges(tok)]
    hf = Qwen2Tokenizer(vocab=model, merges=merges, unk_token=None, bos_token=None, eos_token=END,
                        pad_token=PAD, additional_special_tokens=[SYSTEM, USER, ASSISTANT],
                        model_max_length=model_max_length)
    hf.chat_template = CHAT_TEMPLATE
    hf.padding_side = "left"
    return hf


def _merges(tok) -> list:
    import json

    return json.loads(tok.to_str())["model"]["merges"]
