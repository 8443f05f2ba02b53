"""The verifier the policy tests use: the real sandboxed one (evolve.verification.Verifier)."""

from __future__ import annotations


def make_verifier(jobs: int = 2):
    from evolve.verification import Verifier

    return Verifier(None, jobs=jobs)
