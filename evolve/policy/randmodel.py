"""A tiny RANDOM Qwen2 model + byte-level BPE tokenizer with a chat template, built offline in ~1 s.

For tests, benchmarks and smoke runs that need a real HF model but neither the hub nor the
tiny-coder bootstrap (`evolve.policy.tiny`, which trains a model that can actually code).
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "def f(xs):\n    return sum(x for x in xs if x > 0)\n",
    "def g(xs, k):\n    return [x * 2 for x in xs if x % k == 0]\n",
    "Write a function that returns the largest even number in xs, or 0 when there is none.",
    "def count(xs):\n    n = 0\n    for x in xs:\n        if x < 0:\n            n += 1\n    return n\n",
] * 20


def build_random_model(dest: str | Path, hidden: int = 32, layers: int = 2, vocab: int = 320, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(CORPUS, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  bos_token=None, unk_token=None)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(dest)
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(dest)
    return dest
