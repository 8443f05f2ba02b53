"""Sandboxes that run candidate code: a fork-server (bubblewrap + seccomp + rlimits) and Docker."""

from evolve.verification.sandbox.client import ForkServer, SandboxConfig

__all__ = ["ForkServer", "SandboxConfig"]
