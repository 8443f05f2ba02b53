"""Scale-out backends: where verification and rollouts run (local process or a Ray cluster)."""

from evolve.cluster.backends import BACKENDS, ClusterBackend, open_cluster
from evolve.cluster.config import ClusterConfig

__all__ = ["BACKENDS", "ClusterBackend", "ClusterConfig", "open_cluster"]
