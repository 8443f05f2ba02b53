"""``python -m evolve.cluster.ray_node ARGS``: ``ray start ARGS`` with loopback kept (see loopback.py).

The node's own process needs Ray's multi-node switch on (``ray start --address`` refuses otherwise)
and its address pinned to 127.0.0.1; every process it starts inherits the loopback switch."""

from __future__ import annotations

import sys

from evolve.cluster.loopback import pin_loopback


def main() -> None:
    import ray._private.ray_constants as constants
    from ray.scripts.scripts import main as ray_main

    constants.ENABLE_RAY_CLUSTER = True  # this process may join a cluster; its children keep the env switch
    pin_loopback()
    sys.argv = ["ray", "start", *sys.argv[1:]]
    ray_main()


if __name__ == "__main__":
    main()
