"""Where bubblewrap works on this machine, the verifier must actually use it.

A checkout or venv under /tmp (CI clones, say) is hidden by the sandbox's private /tmp; the
server must still start inside bubblewrap rather than silently fall back to weaker isolation.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from evolve.verification import Verifier


def _bwrap_works() -> bool:
    if not shutil.which("bwrap"):
        return False
    probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "true"],
                           capture_output=True, timeout=20)
    return probe.returncode == 0


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap is not installed or cannot create namespaces here")
def test_full_isolation_is_used_where_bubblewrap_works():
    with Verifier(jobs=1) as v:
        assert v.isolation == "bwrap+seccomp"
