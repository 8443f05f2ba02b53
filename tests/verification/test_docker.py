"""The optional Docker backend. There is no Docker engine on the CI machines: these skip there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evolve.verification.sandbox import docker_backend


def _engine():
    ok, why = docker_backend.available()
    if not ok:
        pytest.skip(f"no Docker engine: {why}")


def test_docker_backend_runs_the_same_harness():
    _engine()
    from evolve.verification.reply import parse_reply
    from evolve.verification.sandbox.codec import encode_args

    sb = docker_backend.DockerSandbox()
    raws = sb.run([{"src": "def f(x):\n    return x + 1\n", "entry": "f", "calls": [encode_args((1,))], "check": None,
                    "timeout": 5, "cpu": 5, "mem_mb": 256},
                   {"src": "import socket\ndef f(x):\n    return socket.socket()\n", "entry": "f",
                    "calls": [encode_args((1,))], "check": None, "timeout": 5, "cpu": 5, "mem_mb": 256}])
    ok, net = parse_reply(raws[0], 1), parse_reply(raws[1], 1)
    assert ok.results[0].value == 2
    assert "hack: network" in net.flags


def test_unavailable_engine_is_reported_not_raised():
    ok, why = docker_backend.available()
    assert isinstance(ok, bool) and (ok or why)


class _FakeContainer:
    """Runs the container's command on this machine, with its /evolve mount mapped to the host
    folder. Stands in for a Docker engine, which cannot exist here; the options are checked."""

    def __init__(self, command, volumes):
        host = next(h for h, v in volumes.items() if v["bind"] == "/evolve")
        script = command[2].replace("/evolve", host).replace("exec python3", f"exec {sys.executable}")
        self.proc = subprocess.run(["sh", "-c", script], capture_output=True, timeout=60)

    def wait(self, timeout=None):
        return {"StatusCode": self.proc.returncode}

    def logs(self, stdout=True, stderr=False):
        return self.proc.stdout

    def remove(self, force=False):
        pass


class _FakeClient:
    def __init__(self):
        self.kwargs = None
        self.containers = self

    def run(self, image, command, **kw):
        self.kwargs = kw
        return _FakeContainer(command, kw["volumes"])


def test_docker_backend_command_and_options_without_an_engine():
    from evolve.verification.reply import parse_reply
    from evolve.verification.sandbox.codec import encode_args

    fake = _FakeClient()
    sb = docker_backend.DockerSandbox(client=fake)
    raws = sb.run([{"src": "def f(x):\n    return [x, x]\n", "entry": "f", "calls": [encode_args((3,))],
                    "check": None, "timeout": 5, "cpu": 5, "mem_mb": 256},
                   {"src": "def f(x):\n    raise SystemExit\n", "entry": "f", "calls": [encode_args((3,))],
                    "check": None, "timeout": 5, "cpu": 5, "mem_mb": 256}])
    assert parse_reply(raws[0], 1).results[0].value == [3, 3]
    assert "hack: sys-exit" in parse_reply(raws[1], 1).flags
    kw = fake.kwargs
    assert kw["network_disabled"] and kw["read_only"] and kw["cap_drop"] == ["ALL"]
    assert kw["user"] == "65534:65534" and "no-new-privileges" in kw["security_opt"]
