"""Connecting the controller (the Ray driver) to a cluster, on loopback here, and what it may write to."""

from __future__ import annotations

import os

from evolve.cluster.loopback import LOOPBACK, LOOPBACK_ENV, assert_loopback, node_addresses, pin_loopback
from evolve.errors import EvolveError


def resolve_address(address: str) -> str:
    """``local:DIR`` = the address recorded by ``scripts/ray_local.sh start`` (evolve.cluster.local) in DIR."""
    if not address.startswith("local:"):
        return address
    from evolve.cluster.local import LocalCluster

    folder = address[len("local:"):] or "runs/ray-local"
    found = LocalCluster.load(folder)
    if found is None:
        raise EvolveError(f"no local Ray cluster recorded in {folder}; start one with `scripts/ray_local.sh start`")
    return found.address


def connect(address: str) -> None:
    """ray.init against an existing cluster; the driver advertises 127.0.0.1 when the cluster is on loopback."""
    address = resolve_address(address)
    host, _, port = address.rpartition(":")
    _reachable(host, port, address)
    loopback = host in (LOOPBACK, "localhost")
    if loopback:
        os.environ.update(LOOPBACK_ENV)
        pin_loopback()
    import ray

    if ray.is_initialized():
        return
    try:
        ray.init(address=address, _node_ip_address=LOOPBACK if loopback else None, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise EvolveError(f"cannot connect to the Ray cluster at {address}: {' '.join(str(e).split())[:200]}") from None
    if loopback:
        assert_loopback()


def _reachable(host: str, port: str, address: str) -> None:
    """Fail in seconds with one line when nothing listens there (ray.init would retry for a minute)."""
    import socket

    if not port.isdigit():
        raise EvolveError(f"not a Ray address: {address!r} (expected HOST:PORT or local:DIR)")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise EvolveError(f"no Ray cluster at {address} ({e.strerror or e}); start one with "
                          "`scripts/ray_local.sh start`") from None


def hosts() -> set[str]:
    """Distinct node addresses of the connected cluster."""
    return set(node_addresses())


def require_shared_lineage(store, node_hosts: set[str]) -> None:
    """Nodes on more than one host need a lineage every host can reach: PostgreSQL, not a SQLite file."""
    if len(node_hosts) > 1 and store.target.sqlite_path is not None:
        raise EvolveError(f"a Ray cluster on {len(node_hosts)} hosts needs a PostgreSQL lineage (--db "
                          "postgresql://...); a SQLite file is local to one host")


def disconnect() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
