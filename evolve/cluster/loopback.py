"""Keep Ray on 127.0.0.1: every node and the driver advertise loopback, never an interface address.

Why this exists (read from Ray 2.60's code): ``ray start --node-ip-address 127.0.0.1`` and
``ray.init(_node_ip_address="127.0.0.1")`` both pass the address through
``ray._private.services.resolve_ip_for_localhost``, which *replaces* a loopback address by
``get_node_ip_address()``, i.e. the address of the interface that routes to 8.8.8.8. The nodes then
register (and advertise, as ``NodeManagerAddress`` and the ``node:<ip>`` resource) that interface
address. Ray's own switch for loopback, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, makes
``get_node_ip_address()`` return 127.0.0.1, but ``ray start`` then refuses to start a second node.

So: the environment switch is set for every process a node starts (raylet, workers), and in the
two processes that resolve an address themselves (each node's ``ray start`` and the driver)
``get_node_ip_address`` is pinned to 127.0.0.1 before anything is resolved. The check that a
cluster really is on loopback is ``assert_loopback`` (every address in ``ray.nodes()``).
"""

from __future__ import annotations

from evolve.errors import EvolveError

LOOPBACK = "127.0.0.1"
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_NODE_IP_ADDRESS": LOOPBACK}


def pin_loopback() -> None:
    """In this process, resolve "this node's address" to 127.0.0.1 (idempotent)."""
    import ray._private.services as services

    if getattr(services.get_node_ip_address, "_evolve_loopback", False):
        return
    original = services.get_node_ip_address

    def get_node_ip_address(address=None):
        import ray

        node = ray._private.worker._global_node
        return node.node_ip_address if node is not None else LOOPBACK

    get_node_ip_address._evolve_loopback = True
    get_node_ip_address._original = original
    services.get_node_ip_address = get_node_ip_address


def node_addresses() -> list[str]:
    """Every address the connected cluster lists: each node's manager address and its node:<ip> resource."""
    import ray

    out = []
    for n in ray.nodes():
        out.append(n.get("NodeManagerAddress"))
        out += [k.split(":", 1)[1] for k in n.get("Resources", {})
                if k.startswith("node:") and k != "node:__internal_head__"]
    return [a for a in out if a]


def assert_loopback() -> None:
    """EvolveError unless every node address of the connected cluster is 127.0.0.1."""
    bad = sorted({a for a in node_addresses() if a != LOOPBACK})
    if bad:
        raise EvolveError(f"the Ray cluster lists non-loopback node addresses {bad}; only 127.0.0.1 is allowed here")
