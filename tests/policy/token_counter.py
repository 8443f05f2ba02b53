"""Counting the tokens a model's embedding layer is given (the shared-prompt paths' tests)."""

from __future__ import annotations


class TokenCounter:
    """Tokens the model's embedding layer was given, over every forward."""

    def __init__(self, model):
        self.tokens = 0
        model.get_input_embeddings().register_forward_hook(self)

    def __call__(self, module, args, output):
        self.tokens += args[0].numel()
