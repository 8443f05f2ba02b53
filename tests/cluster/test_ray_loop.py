"""The loop on a real two-node loopback Ray cluster, through the `evolve` CLI: a 2-generation coupled
run (configs/ray-local.toml: verifier actors + rollout actors) is hash-equal to the same run with
backend = "local" (prompt hashes, weights sha256, every rollout and metric but wall-clock ones).

The fault tests (a verifier actor and a rollout actor killed -9 mid-generation; the controller
killed -9 mid-generation and resumed) take a few minutes on 2 shared cores, so CI skips them;
run them with EVOLVE_RAY_SLOW=1 (see README, "Scale-out on Ray")."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from cluster_helpers import SLOW_ENV, actor_pids

from evolve.errors import EvolveError

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "ray-local.toml"
ARGS = ["--config", str(CONFIG), "--reward", "random"]  # random reward: the weights move every generation
slow = pytest.mark.skipif(os.environ.get(SLOW_ENV) != "1", reason=f"slow Ray test: set {SLOW_ENV}=1")


def fingerprints(db, run: str) -> list[dict]:
    from loop_helpers import fingerprints

    return fingerprints(db, run)


def wait_pending(db, run: str, committed: int, proc) -> None:
    from loop_helpers import wait_pending

    wait_pending(db, run, committed, proc)


def _db(kind: str, folder: Path):
    from loop_helpers import make_loop_db

    folder.mkdir(parents=True, exist_ok=True)
    return make_loop_db(kind, folder)


def _kind() -> str:
    from loop_helpers import BACKENDS

    return BACKENDS[-1]  # PostgreSQL when configured (CI), else SQLite


@pytest.fixture(scope="module")
def local_run(loop_helpers_path, tmp_path_factory, tiny_model_dir):
    """The same config with backend = "local": the reference every cluster run must equal."""
    folder = tmp_path_factory.mktemp("local-run")
    config = folder / "local.toml"
    config.write_text(CONFIG.read_text().replace('backend = "ray"', 'backend = "local"'))
    gen = _db("sqlite", folder / "db")
    db = next(gen)
    db.evolve("run", "--config", str(config), "--reward", "random", "--name", "ref")
    yield fingerprints(db, "ref")
    next(gen, None)


@pytest.fixture
def cluster_db(loop_helpers_path, tmp_path):
    gen = _db(_kind(), tmp_path / "db")
    yield next(gen)
    next(gen, None)


def test_ray_run_equals_local(ray_cluster, cluster_db, local_run):
    proc = cluster_db.evolve("run", *ARGS, "--ray", ray_cluster.address, "--name", "ray")
    said = " ".join(proc.stderr.split())  # the status lines (rich may wrap them)
    assert "verification on 2 Ray actor(s)" in said and "rollouts on 2 Ray actor(s)" in said, said[-1000:]
    got = fingerprints(cluster_db, "ray")
    assert [f["index"] for f in got] == [0, 1, 2]
    assert got == local_run
    assert len({f["weights_sha256"] for f in got}) == 3, "the weights never moved: the sync is untested"
    assert cluster_db.evolve("check", "ray").returncode == 0
    store = cluster_db.store()
    try:
        config = store.get_run("ray").config
    finally:
        store.close()
    assert config["cluster"]["backend"] == "ray" and config["verifier_isolation"] == "bwrap+seccomp"


def test_multi_host_cluster_needs_postgresql(tmp_path):
    from evolve.cluster.runtime import require_shared_lineage
    from evolve.lineage import LineageStore

    store = LineageStore.open(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        require_shared_lineage(store, {"127.0.0.1"})  # one host: a SQLite file is fine
        with pytest.raises(EvolveError, match="needs a PostgreSQL lineage"):
            require_shared_lineage(store, {"10.0.0.1", "10.0.0.2"})
    finally:
        store.close()


def _kill_one(cluster, class_name: str, limit_s: float = 60) -> int:
    deadline = time.time() + limit_s
    while time.time() < deadline:
        pids = actor_pids(cluster, class_name)
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            return pids[0]
        time.sleep(0.2)
    pytest.fail(f"no {class_name} process found")


@slow
def test_killed_actors_lose_nothing(ray_cluster, cluster_db, local_run, tmp_path):
    """A verifier actor and a rollout actor killed -9 in generation 1: the run finishes, equal to local."""
    proc = cluster_db.popen("run", *ARGS, "--ray", ray_cluster.address, "--name", "faults", log=tmp_path / "log")
    try:
        wait_pending(cluster_db, "faults", 1, proc)
        _kill_one(ray_cluster, "VerifierActor")
        _kill_one(ray_cluster, "RolloutActor")
        assert proc.wait(timeout=600) == 0, (tmp_path / "log").read_text()[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert fingerprints(cluster_db, "faults") == local_run
    assert cluster_db.evolve("check", "faults").returncode == 0


@slow
def test_killed_controller_resumes_identical(ray_cluster, cluster_db, local_run, tmp_path):
    """The controller killed -9 mid-generation 2: committed generations intact, resume on the cluster
    equals the uninterrupted local run, and `evolve check` holds."""
    proc = cluster_db.popen("run", *ARGS, "--ray", ray_cluster.address, "--name", "cut", log=tmp_path / "log")
    try:
        wait_pending(cluster_db, "cut", 2, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert cluster_db.statuses("cut")[:2] == ["committed", "committed"]
    assert cluster_db.evolve("check", "cut").returncode == 0
    cluster_db.evolve("resume", "cut", "--generations", "1", "--ray", ray_cluster.address)
    assert fingerprints(cluster_db, "cut") == local_run
    assert cluster_db.evolve("check", "cut").returncode == 0
