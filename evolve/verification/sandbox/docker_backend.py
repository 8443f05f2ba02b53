"""EXPERIMENTAL, NOT WIRED: a Docker backend for repository-level tasks (``pip install evolve[docker]``).

Status: no pipeline, ``Verifier`` or loop path uses it, and ``DockerSandbox.run`` refuses to run.
It was written against the fork-server's first protocol, in which one server process read every
job's source; the hardened server (per-slot pipes from the parent, per-job namespaces, see
docs/sandbox.md) needs file descriptors handed into the container, which is not built yet. What
stays here is what is tested: whether an engine answers, and the container options a port must
keep (no network, read-only root, tmpfs /tmp, memory and pids limits, all capabilities dropped,
no-new-privileges, uid 65534, the task repository read-only at /repo).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evolve.errors import EvolveError

EXPERIMENTAL = ("the Docker verification backend is experimental and not wired into the verifier: "
                "it is not ported to the hardened sandbox protocol (see docs/sandbox.md)")


@dataclass(frozen=True)
class DockerConfig:
    """Container limits for one batch of jobs."""

    image: str = "python:3.11-slim"  # needs python3 on PATH
    jobs: int = 2  # concurrent forked jobs inside the container
    memory_mb: int = 2048  # container memory limit (each job also has its own RLIMIT_AS)
    pids: int = 64  # pids limit for the whole container
    tmp_mb: int = 256  # tmpfs size at /tmp
    repo: str | None = None  # a host folder mounted read-only at /repo (repository-level tasks)
    timeout_s: float = 600.0  # wall clock for the whole batch


def _client():
    try:
        import docker
    except ImportError as e:
        raise EvolveError("the Docker backend needs the docker SDK: pip install 'evolve[docker]'") from e
    return docker.from_env()


def available() -> tuple[bool, str]:
    """(True, "") when a Docker engine answers, else (False, why)."""
    try:
        client = _client()
        client.ping()
        return True, ""
    except Exception as e:  # noqa: BLE001 - any failure means: not usable here
        return False, f"{type(e).__name__}: {str(e)[:120]}"


def container_options(c: DockerConfig, workdir: str) -> dict:
    """``docker.containers.run`` keyword arguments: the isolation a port of the backend must keep."""
    volumes = {workdir: {"bind": "/evolve", "mode": "ro"}}
    if c.repo:
        volumes[str(Path(c.repo).resolve())] = {"bind": "/repo", "mode": "ro"}
    return {"detach": True, "network_disabled": True, "read_only": True, "tmpfs": {"/tmp": f"size={c.tmp_mb}m"},
            "mem_limit": f"{c.memory_mb}m", "pids_limit": c.pids, "user": "65534:65534", "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"], "volumes": volumes, "working_dir": "/tmp"}


class DockerSandbox:
    """Placeholder with the ForkServer's interface; ``run`` refuses (see the module docstring)."""

    isolation = "docker"

    def __init__(self, config: DockerConfig | None = None, client=None):
        self.config = config or DockerConfig()
        self._client = client

    def run(self, jobs: list[dict]) -> list[dict]:
        raise EvolveError(EXPERIMENTAL)

    def close(self) -> None:
        pass
