"""Prompt selection (``[loop.selection]``): the Protocol in ``base``, one file per rule, the registry in
``registry``. Nothing is imported here, so ``evolve.loop.config`` can read ``configs`` without a cycle."""
