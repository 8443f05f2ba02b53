"""The optional Docker backend. There is no Docker engine on the CI machines: these skip there."""

from __future__ import annotations

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
