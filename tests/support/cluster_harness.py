"""A cluster of `minikafka serve` processes on loopback for tests (issue 16): KRaft combined mode
(every node broker and controller), Kafka's own config keys, per-node kill -9 / SIGSTOP / SIGCONT /
restart on the node's data dir and ports. `bootstrap` lists every node's broker listener."""
from __future__ import annotations

import os
import re
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from tests.conftest import BrokerProcess, free_port
from tests.support.helpers import RawClient, metadata_raw, wait_until

NOT_LEADER_OR_FOLLOWER = 6
TIMEOUTS = {"controller.quorum.fetch.timeout.ms": "1000", "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.election.backoff.max.ms": "300", "controller.quorum.request.timeout.ms": "1000"}


class Cluster:
    def __init__(self, root: Path, size: int = 3, config: dict[str, str] | None = None,
                 broker_only: int = 0, controller_only: bool = False) -> None:
        """`size` voters (ids 1..size: combined nodes, or process.roles=controller with
        `controller_only`), then `broker_only` nodes with process.roles=broker (observers of the quorum,
        ids size+1..). `brokers` are the ids that serve clients."""
        self.voters = list(range(1, size + 1))
        self.ids = list(range(1, size + broker_only + 1))
        self.brokers = [n for n in self.ids if not (controller_only and n in self.voters)]
        self.controller_ports = {n: free_port() for n in self.voters}
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.controller_ports.items())
        self.nodes: dict[int, BrokerProcess] = {}
        for n in self.ids:
            port = free_port()
            if n in self.controller_ports and controller_only:
                port = self.controller_ports[n]  # its only listener (ApiVersions answers there too)
                roles = {"process.roles": "controller", "listeners": f"CONTROLLER://127.0.0.1:{port}"}
            elif n in self.controller_ports:
                roles = {"process.roles": "broker,controller",
                         "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{self.controller_ports[n]}"}
            else:
                roles = {"process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
            self.nodes[n] = BrokerProcess(root / f"node{n}" / "data", {
                "node.id": str(n), **roles,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER", "controller.quorum.voters": voters, **TIMEOUTS,
                **(config or {})}, port=port)

    def start(self) -> "Cluster":
        for node in self.nodes.values():
            node.start()
        return self

    @property
    def bootstrap(self) -> str:
        """Every broker's listener (clients find the rest through Metadata)."""
        return ",".join(self.nodes[n].bootstrap for n in self.brokers)

    def kill(self, n: int) -> None:
        self.nodes[n].kill()

    def pause(self, n: int) -> None:
        os.kill(self.nodes[n].pid, signal.SIGSTOP)

    def resume(self, n: int) -> None:
        os.kill(self.nodes[n].pid, signal.SIGCONT)

    def restart(self, n: int) -> None:
        """Start node n again (after kill or stop) on the same data dir and ports."""
        self.nodes[n].start()

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.pid is not None:
                try:
                    os.kill(node.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            node.stop()

    def describe(self, n: int):
        """(error, leader id, leader epoch, high watermark, {voter: log end offset}) as node n answers."""
        with RawClient(f"127.0.0.1:{self.controller_ports[n]}", timeout=3.0) as c:
            req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.TopicData.PartitionData(
                    partition_index=0)])])
            resp = c.request(req, 2, DescribeQuorumResponse)
        p = resp.topics[0].partitions[0]
        return p.error_code, p.leader_id, p.leader_epoch, p.high_watermark, {
            v.replica_id: v.log_end_offset for v in p.current_voters}

    def agreed_leader(self, among: list[int], timeout: float = 10.0, newer_than: int = 0) -> tuple[int, int]:
        """Wait until every node in `among` names the same leader (one of them) in the same epoch
        (> newer_than), the leader answering as leader; (leader, epoch)."""
        found: list[tuple[int, int]] = []

        def agreed() -> bool:
            try:
                views = {n: self.describe(n) for n in among}
            except OSError:
                return False
            pairs = {(v[1], v[2]) for v in views.values()}
            if len(pairs) != 1:
                return False
            leader, epoch = pairs.pop()
            if leader not in among or epoch <= newer_than or views[leader][0] != 0:
                return False
            found[:] = [(leader, epoch)]
            return all(v[0] == NOT_LEADER_OR_FOLLOWER for n, v in views.items() if n != leader)
        wait_until(agreed, timeout=timeout, what=f"nodes {among} agree on a leader newer than epoch {newer_than}")
        return found[0]

    def leaders_by_epoch(self) -> dict[int, set[int]]:
        """From every node's log: epoch -> the nodes that were leader in it."""
        out: dict[int, set[int]] = {}
        for n, node in self.nodes.items():
            for epoch in re.findall(r"metadata quorum: node \d+ is leader in epoch (\d+)", node.log_path.read_text()):
                out.setdefault(int(epoch), set()).add(n)
        return out


def brokers(c: Cluster, n: int) -> set[int]:
    """The broker ids node n's Metadata lists (empty while it does not answer)."""
    try:
        with RawClient(c.nodes[n].bootstrap, timeout=3) as cl:
            return {b.node_id for b in metadata_raw(cl).brokers}
    except OSError:
        return set()


def registered(c: Cluster, n: int | None = None) -> bool:
    """Node n (default: the first broker) lists every client-serving node as a broker."""
    return brokers(c, c.brokers[0] if n is None else n) == set(c.brokers)


@contextmanager
def running(c: Cluster, timeout: float = 20.0) -> Iterator[Cluster]:
    """The cluster started and every client-serving node listing all of them as brokers; at the end each node
    still running is killed -9 (a clean shutdown proves nothing in these tests and costs seconds), then reaped."""
    c.start()
    try:
        wait_until(lambda: all(brokers(c, n) == set(c.brokers) for n in c.brokers), timeout=timeout,
                   what=f"brokers {c.brokers} registered")
        yield c
    finally:
        for n in c.ids:
            if c.nodes[n].pid is not None:
                c.kill(n)
        c.stop()
