"""Prompt evolution: candidates, reflection, Pareto selection."""
