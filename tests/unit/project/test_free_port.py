"""minikafka.testing.free_port: server ports below the kernel's ephemeral range (a killed broker's port is
not handed to a client's connect() before the broker restarts on it), one slice per pytest-xdist worker,
each port free when returned and not handed out again soon."""
from __future__ import annotations

import socket

from minikafka import testing


def test_ports_are_below_the_ephemeral_range_in_the_workers_slice(monkeypatch):
    floor = testing._ephemeral_floor()
    slices = set()
    for worker in ("", "gw0", "gw1", "gw5"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        bounds = testing._port_slice()
        assert bounds is not None
        lo, hi = bounds
        assert testing._PORT_FLOOR <= lo < hi <= floor
        slices.add(bounds)
        ports = [testing.free_port() for _ in range(50)]
        assert len(set(ports)) == 50  # walks its slice, no early reuse
        assert all(lo <= p < hi for p in ports)
    assert len(slices) == 4  # disjoint slices: [lo, hi) of equal size from one floor


def test_a_taken_port_is_skipped(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    lo, hi = bounds = testing._port_slice()
    port = testing.free_port()
    while port > hi - 10:  # room after it (the walk wraps at the slice's end)
        port = testing.free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        testing._port_next[bounds] = port  # the next pick would be the taken port
        got = testing.free_port()
        assert port < got < port + 10
        with socket.socket() as s:  # ... and what it returns is bindable
            s.bind(("127.0.0.1", got))
