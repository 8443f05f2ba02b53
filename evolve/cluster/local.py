"""A local Ray cluster on loopback: a head and worker nodes as separate `ray start --block` processes.

Every node binds and advertises 127.0.0.1 (``--node-ip-address``), picks free ports at start, keeps the
dashboard off and a small object store. Each node runs in its own process group, recorded with its
pid in ``<state_dir>/cluster.json``, and is stopped by signalling that group: never a broad
``ray stop``, which would also stop other users' clusters on the machine.

    python -m evolve.cluster.local start [--dir runs/ray-local] [--nodes 2] [--cpus 1]   # prints the address
    python -m evolve.cluster.local stop  [--dir runs/ray-local]
    python -m evolve.cluster.local status [--dir runs/ray-local]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evolve.cluster.loopback import LOOPBACK, LOOPBACK_ENV
from evolve.errors import EvolveError

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's floor is 75 MiB; the tiny models' weights are a few MB
STATE_FILE = "cluster.json"


@dataclass
class LocalCluster:
    """What was started: the GCS address, the nodes' pids (each leads its own process group), logs."""

    address: str
    state_dir: str
    pids: list[int] = field(default_factory=list)
    temp_dir: str = ""

    def save(self) -> None:
        Path(self.state_dir, STATE_FILE).write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, state_dir: str | Path) -> LocalCluster | None:
        f = Path(state_dir, STATE_FILE)
        return cls(**json.loads(f.read_text())) if f.exists() else None

    def stop(self, timeout: float = 5.0) -> None:
        """SIGKILL each node's process group and wait up to ``timeout`` for it to be gone. Not SIGTERM
        first: ``ray start --block`` answers it with a graceful shutdown that took 33.5 s on 2 loaded AMD EPYC cores
        (measured, Dec 2026), and a 5 s grace expired on every stop; nothing of the cluster is kept (its
        session folder is removed below), which is also what ``ray stop --force`` does."""
        for pid in self.pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_group_alive(p) for p in self.pids):
            time.sleep(0.05)
        Path(self.state_dir, STATE_FILE).unlink(missing_ok=True)
        if self.temp_dir.startswith("/tmp/evray-"):  # Ray's session folder (sockets, logs) of this cluster only
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def _group_alive(pgid: int) -> bool:
    # A leader this process started and nobody has waited for stays a zombie, and a zombie still answers
    # signal 0: without reaping it, stop() waited out both of its deadlines (10 s) on an already dead node.
    try:
        os.waitpid(pgid, os.WNOHANG)
    except ChildProcessError:  # not our child (stopped from another process), or already reaped
        pass
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def free_ports(n: int, taken: set[int]) -> list[int]:
    """``n`` distinct free loopback ports, none already in ``taken`` (they are added to it). The sockets stay
    bound together while choosing: one bind-and-close at a time can hand the same port out twice, and Ray
    refuses a node whose components share a port (seen in CI: runtime_env_agent = dashboard_agent_http)."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
            if port not in taken:
                ports.append(port)
                taken.add(port)
    finally:
        for s in socks:
            s.close()
    return ports


def ray_env() -> dict:
    """Environment of every node (and so of every worker process it starts)."""
    env = dict(os.environ)
    env.update(LOOPBACK_ENV)
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_DISABLE_DOCKER_CPU_WARNING="1",
               RAY_memory_monitor_refresh_ms="0", RAY_enable_metrics_collection="0",
               OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               HF_HUB_DISABLE_TELEMETRY="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    repo = str(Path(__file__).resolve().parents[2])  # workers import this checkout's evolve
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    return env


def _node_args(cpus: int, taken: set[int]) -> list[str]:
    ports = free_ports(6, taken)
    return ["--node-ip-address", LOOPBACK, "--num-cpus", str(cpus), "--num-gpus", "0",
            "--object-store-memory", str(OBJECT_STORE_BYTES), "--disable-usage-stats", "--block",
            "--node-manager-port", str(ports[0]), "--object-manager-port", str(ports[1]),
            "--metrics-export-port", str(ports[2]), "--runtime-env-agent-port", str(ports[3]),
            "--dashboard-agent-listen-port", str(ports[4]), "--dashboard-agent-grpc-port", str(ports[5]),
            "--min-worker-port", "0", "--max-worker-port", "0"]


def require_ray() -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise EvolveError("ray is not installed: pip install -e '.[ray]' (or run scripts/setup.sh)")


def start(state_dir: str | Path, nodes: int = 2, cpus: int = 1, timeout: float = 120.0) -> LocalCluster:
    """Start a head and ``nodes - 1`` worker nodes; return once every node is alive."""
    require_ray()
    state = Path(state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    old = LocalCluster.load(state)
    if old is not None and any(_group_alive(p) for p in old.pids):
        raise EvolveError(f"a local cluster is already running from {state} (address {old.address}); stop it first")
    # Ray's sockets live under the temp dir: keep its path short (AF_UNIX paths are limited to 107 bytes).
    temp = tempfile.mkdtemp(prefix="evray-", dir="/tmp")
    taken: set[int] = set()  # every port this cluster's nodes were given: no two components share one
    (port,) = free_ports(1, taken)
    address = f"{LOOPBACK}:{port}"
    cluster = LocalCluster(address=address, state_dir=str(state), temp_dir=temp)
    env, procs = ray_env(), []
    head = ["--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", temp]
    try:
        for i in range(nodes):
            args = head if i == 0 else ["--address", address]
            log = open(state / f"node{i}.log", "wb")  # noqa: SIM115 - the node process owns it
            proc = subprocess.Popen([sys.executable, "-m", "evolve.cluster.ray_node", *args, *_node_args(cpus, taken)], stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
            procs.append(proc)
            cluster.pids.append(proc.pid)
            cluster.save()
            _wait_nodes(address, i + 1, timeout, procs, state)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_nodes(address: str, count: int, timeout: float, procs: list, state: Path) -> None:
    """Wait for the newest node's "Ray runtime started." (its log, no polling of Ray itself), then ask the
    GCS once, in a subprocess, that ``count`` nodes are alive."""
    deadline = time.monotonic() + timeout
    log = state / f"node{count - 1}.log"
    while b"Ray runtime started." not in (log.read_bytes() if log.exists() else b""):
        if any(p.poll() is not None for p in procs):
            raise EvolveError(f"a Ray node exited while starting (see {log})")
        if time.monotonic() > deadline:
            raise EvolveError(f"the local Ray cluster did not reach {count} node(s) in {timeout:.0f}s (see {log})")
        time.sleep(0.3)
    probe = ("from ray._raylet import GcsClient\n"
             f"c = GcsClient(address='{address}')\n"
             "print(sum(1 for n in c.get_all_node_info(timeout=10).values() if n.state == 0))\n")
    while time.monotonic() < deadline:
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=ray_env(), timeout=60)
        if r.stdout.strip().isdigit() and int(r.stdout.strip()) >= count:
            return
        time.sleep(1.0)
    raise EvolveError(f"the local Ray cluster did not reach {count} node(s) in {timeout:.0f}s (logs in {state})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evolve.cluster.local", description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--dir", default="runs/ray-local", help="where cluster.json (pids, address) and logs go")
    p.add_argument("--nodes", type=int, default=2, help="head + worker nodes")
    p.add_argument("--cpus", type=int, default=1, help="num_cpus of each node")
    a = p.parse_args(argv)
    try:
        if a.action == "start":
            c = start(a.dir, a.nodes, a.cpus)
            print(c.address)
        elif a.action == "stop":
            c = LocalCluster.load(a.dir)
            if c is not None:
                c.stop()
            print("stopped" if c else "no cluster recorded")
        else:
            c = LocalCluster.load(a.dir)
            alive = c is not None and all(_group_alive(pid) for pid in c.pids)
            print(f"{c.address} pids {c.pids} {'alive' if alive else 'NOT alive'}" if c else "no cluster recorded")
            return 0 if alive else 1
    except EvolveError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
