"""`[cluster]`: where verification and rollouts run. `local` (the default) is today's single process."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evolve.errors import ConfigError
from evolve.util.config_model import validate_as
from evolve.util.toml_files import read_toml


class ClusterConfig(BaseModel):
    """The cluster table of a loop config TOML (`[cluster]`); recorded in the run so resume uses it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    backend: Literal["local", "ray"] = Field(
        "local", description="\"local\": verifier and policy in the controller's process, exactly as without a "
        "[cluster] table. \"ray\": a pool of verifier actors and of CPU rollout actors on a Ray cluster; the "
        "controller stays one process.")
    address: str | None = Field(
        None, description="Ray cluster address: GCS host:port (e.g. 127.0.0.1:6379), or \"local:DIR\" for the cluster "
        "`scripts/ray_local.sh start DIR` recorded; `evolve run --ray ADDRESS` overrides it. Required for \"ray\".")
    verifier_actors: int = Field(2, ge=1, description="Verifier actors, each with its own sandboxed Verifier.")
    verifier_jobs: int = Field(1, ge=1, description="Parallel sandbox jobs inside each verifier actor.")
    rollout_actors: int = Field(2, ge=0, description="CPU policy replicas (0 = generate in the controller).")
    actor_cpus: float = Field(
        0.5, gt=0, description="num_cpus Ray reserves per actor (the local test cluster has 1 CPU per node).")
    max_retries: int = Field(3, ge=0, description="Times a shard whose actor died is sent to another actor.")

    @classmethod
    def from_toml(cls, path: str | Path, address: str | None = None) -> ClusterConfig:
        """The `[cluster]` table of ``path`` (absent = local); ``address`` (``--ray``) selects ray."""
        data = read_toml(path, not_found="config file not found").get("cluster", {}) if path else {}
        return cls.from_dict(data, source=str(path or "config"), address=address)

    @classmethod
    def from_dict(cls, data: dict | None, source: str = "config", address: str | None = None) -> ClusterConfig:
        data = dict(data or {})
        if address:
            data.update(backend="ray", address=address)
        cfg = validate_as(cls, data, source, "cluster")
        if cfg.backend == "ray" and not cfg.address:
            raise ConfigError(f"{source}: [cluster] backend = \"ray\" needs an address (or --ray ADDRESS)")
        return cfg
