"""[cluster] bad input: one-line ConfigError/EvolveError, never a traceback or a minute-long retry."""

from __future__ import annotations

import time

import pytest

from evolve.cluster import ClusterConfig
from evolve.errors import ConfigError, EvolveError


def test_default_is_local_and_ray_needs_an_address(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[loop]\ngenerations = 1\n")
    assert ClusterConfig.from_toml(f).backend == "local"
    assert ClusterConfig.from_toml(f, address="127.0.0.1:6379").backend == "ray"  # --ray
    f.write_text('[cluster]\nbackend = "ray"\n')
    with pytest.raises(ConfigError, match="needs an address"):
        ClusterConfig.from_toml(f)


@pytest.mark.parametrize("body, message", [
    ('backend = "ray"\naddress = "x:1"\nfoo = 1', "unknown key 'cluster.foo'"),
    ('backend = "slurm"', "backend: Input should be"),
    ('backend = "ray"\naddress = "x:1"\nverifier_actors = 0', "verifier_actors"),
])
def test_bad_cluster_table_is_one_line(tmp_path, body, message):
    f = tmp_path / "c.toml"
    f.write_text(f"[cluster]\n{body}\n")
    with pytest.raises(ConfigError, match=message) as e:
        ClusterConfig.from_toml(f)
    assert "\n" not in str(e.value)


def test_unreachable_or_unrecorded_cluster_fails_fast(tmp_path):
    from evolve.cluster.runtime import connect

    t0 = time.monotonic()
    with pytest.raises(EvolveError, match="no Ray cluster at 127.0.0.1:1"):
        connect("127.0.0.1:1")
    with pytest.raises(EvolveError, match="no local Ray cluster recorded"):
        connect(f"local:{tmp_path}")
    assert time.monotonic() - t0 < 10
