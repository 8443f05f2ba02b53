"""Optional Docker backend (``pip install evolve[docker]``), for repository-level tasks.

It runs the same fork-server and harness as the local sandbox, inside a throwaway container:
no network, read-only root, a size-capped tmpfs at /tmp, a memory and pids limit, all
capabilities dropped, ``no-new-privileges``, uid 65534. Jobs go in as a read-only file on stdin
(the container's command redirects it), replies come back on stdout, so results are parsed and
compared in the parent exactly as for the local sandbox. The image must have a ``python3``
(3.11+) on its PATH; the task's repository, if any, is mounted read-only at /repo.

The Docker SDK is imported lazily; ``available()`` says whether an engine answers. Inside the
container the syscall filter is Docker's default seccomp profile (pyseccomp is not assumed in the
image); the harness's audit hook, exact-type results and parent-side comparison are the same.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evolve.errors import EvolveError
from evolve.verification.sandbox.client import _BOOT, server_source


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


class DockerSandbox:
    """``run(jobs)`` with the ForkServer's job/reply format, executed in a fresh container."""

    isolation = "docker"

    def __init__(self, config: DockerConfig | None = None, client=None):
        self.config = config or DockerConfig()
        self._client = client  # a docker.DockerClient; None: docker.from_env() at the first run

    def run(self, jobs: list[dict]) -> list[dict]:
        c = self.config
        client = self._client or _client()
        server_cfg = {"jobs": c.jobs, "out_cap": 1 << 20, "res_cap": 8 << 20, "fsize": 16 << 20,
                      "drop_uid": False, "hide": [], "seccomp": None, "in_bwrap": True}
        with tempfile.TemporaryDirectory() as d:
            batch = Path(d) / "jobs.jsonl"
            batch.write_text("".join(json.dumps({**j, "id": i}) + "\n" for i, j in enumerate(jobs)))
            (Path(d) / "worker.py").write_text(server_source())
            for f in (batch, Path(d) / "worker.py"):  # readable by the container's uid 65534
                f.chmod(0o644)
            Path(d).chmod(0o755)
            cmd = (f"exec python3 -I -S -B -c {shlex.quote(_BOOT)} \"$(cat /evolve/worker.py)\" "
                   f"{shlex.quote(json.dumps(server_cfg))} < /evolve/jobs.jsonl")
            volumes = {d: {"bind": "/evolve", "mode": "ro"}}
            if c.repo:
                volumes[str(Path(c.repo).resolve())] = {"bind": "/repo", "mode": "ro"}
            container = client.containers.run(
                c.image, ["sh", "-c", cmd], detach=True, network_disabled=True, read_only=True,
                tmpfs={"/tmp": f"size={c.tmp_mb}m"}, mem_limit=f"{c.memory_mb}m", pids_limit=c.pids,
                user="65534:65534", cap_drop=["ALL"], security_opt=["no-new-privileges"], volumes=volumes,
                working_dir="/tmp")
            try:
                container.wait(timeout=c.timeout_s)
                out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            finally:
                container.remove(force=True)
        replies: list[dict | None] = [None] * len(jobs)
        for line in out.splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            i = msg.get("id")
            if isinstance(i, int) and 0 <= i < len(jobs):
                replies[i] = msg
        return [r or {"server_died": True, "lines": [], "flags": []} for r in replies]

    def close(self) -> None:
        pass
