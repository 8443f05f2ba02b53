"""A real local Ray cluster for these tests: a head and a second node process, 1 CPU each, on
127.0.0.1 only, started by the test session (evolve.cluster.local) and stopped by process group."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

if importlib.util.find_spec("ray") is None:  # the dev extra installs it; without it these files are not collected
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    from evolve.cluster.local import start

    cluster = start(tmp_path_factory.mktemp("ray-local"), nodes=2, cpus=1)
    yield cluster
    from evolve.cluster.runtime import disconnect

    disconnect()
    # stop() returns once every node's process group is gone, not at its deadline: it used to wait out a
    # SIGTERM grace that `ray start --block` never met and count its own unreaped leaders as alive (10 s).
    t0 = time.monotonic()
    cluster.stop(timeout=60)
    assert time.monotonic() - t0 < 60 and all(_group_gone(p) for p in cluster.pids), "a node outlived stop()"


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="session")
def ray_driver(ray_cluster):
    """This test process connected to the cluster as a driver (advertising 127.0.0.1)."""
    from evolve.cluster.runtime import connect

    connect(ray_cluster.address)
    return ray_cluster


@pytest.fixture(scope="session")
def loop_helpers_path():
    """tests/loop's helpers (LoopDB: a SQLite or PostgreSQL lineage and the `evolve` CLI against it)."""
    import sys
    from pathlib import Path

    path = str(Path(__file__).resolve().parents[1] / "loop")
    if path not in sys.path:
        sys.path.insert(0, path)
    return path
