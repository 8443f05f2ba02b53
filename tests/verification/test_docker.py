"""The Docker backend is experimental and not wired (see its module docstring): these tests pin
exactly that, and the container options a port must keep. No Docker engine runs on CI machines."""

from __future__ import annotations

import sys
import types

import pytest

from evolve.errors import EvolveError
from evolve.verification.sandbox import docker_backend


def test_run_refuses_with_a_clear_message():
    with pytest.raises(EvolveError, match="experimental and not wired"):
        docker_backend.DockerSandbox(client=object()).run([{"src": "x = 1"}])


def test_unavailable_engine_is_reported_with_the_reason(monkeypatch):
    class _Broken:
        def ping(self):
            raise ConnectionError("no socket at /var/run/docker.sock")

    monkeypatch.setitem(sys.modules, "docker", types.SimpleNamespace(from_env=lambda: _Broken()))
    ok, why = docker_backend.available()
    assert ok is False and why == "ConnectionError: no socket at /var/run/docker.sock"


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ImportError
    ok, why = docker_backend.available()
    assert ok is False and "pip install 'evolve[docker]'" in why


def test_container_options_keep_the_isolation(tmp_path):
    kw = docker_backend.container_options(docker_backend.DockerConfig(repo=str(tmp_path)), "/work/x")
    assert kw["network_disabled"] and kw["read_only"] and kw["cap_drop"] == ["ALL"]
    assert kw["user"] == "65534:65534" and kw["security_opt"] == ["no-new-privileges"]
    assert kw["volumes"][str(tmp_path.resolve())] == {"bind": "/repo", "mode": "ro"}
    assert kw["volumes"]["/work/x"]["mode"] == "ro" and kw["pids_limit"] == 64
