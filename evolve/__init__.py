"""evolve: a self-evolution loop for code models (weights + prompt, one lineage)."""

__version__ = "0.1.0"
