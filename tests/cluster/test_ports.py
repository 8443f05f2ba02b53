"""The local Ray cluster's ports (evolve/cluster/local.py): every component of every node gets its own.
One bind-and-close at a time hands the same port out again (300 such picks here repeated ~4 ports on
average), and Ray then refuses to start the node, which failed a CI run."""

from __future__ import annotations

import socket

from evolve.cluster.local import LOOPBACK, free_ports


def test_ports_are_distinct_free_and_never_one_already_taken():
    taken = {free_ports(1, set())[0]}
    before = set(taken)
    ports = free_ports(300, taken)
    assert len(set(ports)) == 300 and not set(ports) & before
    assert taken == before | set(ports)
    for port in ports[:20]:  # free: each can be bound now
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOOPBACK, port))
