"""What keeps a job cheap without weakening a check (issue 24, throughput): on real sandbox servers."""

from __future__ import annotations

import builtins

import pytest

from evolve.verification.sandbox.client import ForkServer, SandboxConfig
from evolve.verification.sandbox.harness import watch_builtins


def test_the_builtins_version_tag_is_read_right_on_this_interpreter():
    watch = watch_builtins()
    assert watch is not None, "the self-test failed: every job copies builtins again (~75 page faults each)"
    read, tag, version, snapshot = watch
    assert read(tag) == version and snapshot == builtins.__dict__
    builtins.__dict__["_evolve_probe"] = 1
    try:
        assert read(tag) != version
    finally:
        del builtins.__dict__["_evolve_probe"]


def test_the_server_uses_the_version_tag():
    fs = ForkServer(SandboxConfig(jobs=1))
    try:
        fs.ready()
        assert fs._proc.hello["watch"] is True
    finally:
        fs.close()


@pytest.mark.parametrize("patch", [
    "import builtins\nbuiltins.__dict__['len'] = lambda x: 0\n",
    "import builtins\ndel builtins.sorted\n",
    "import builtins\nbuiltins.max = min\n",
])
def test_a_changed_or_deleted_builtin_is_still_flagged(verifier, add_task, patch):
    ok = verifier.verify(add_task, "def add(a, b):\n    return a + b\n")
    r = verifier.verify(add_task, patch + "def add(a, b):\n    return a + b\n")
    after = verifier.verify(add_task, "def add(a, b):\n    return a + b\n")
    assert ok.passed and after.passed
    assert "hack: monkeypatch" in r.hack_flags and not r.passed


def test_an_added_name_or_a_restored_builtin_is_not_flagged_as_before(verifier, add_task):
    body = ("import builtins\nbuiltins.helper_x = 1\nold = builtins.len\nbuiltins.len = None\nbuiltins.len = old\n"
            "def add(a, b):\n    return a + b\n")
    r = verifier.verify(add_task, body)
    assert r.passed and not r.hack_flags
