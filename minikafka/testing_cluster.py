"""`MiniKafkaCluster`: several minikafka processes on loopback forming one Kafka cluster (KRaft combined
mode: every node is a broker and a controller voter), for tests of what clients do when a broker dies.

    from minikafka.testing import MiniKafkaCluster
    with MiniKafkaCluster(3) as cluster:
        cluster.bootstrap_servers                 # every node's broker listener
        cluster.create_topic("orders", partitions=3, replication_factor=3)
        leader = cluster.leader_of("orders", 0)   # node id
        cluster.kill(leader)                      # kill -9; clients fail over to another replica
        cluster.start_node(leader)                # back on the same ports and data: it catches up
        cluster.pause(2); cluster.resume(2)       # SIGSTOP / SIGCONT (a frozen, not a dead, node)

Invariants: node ids are 1..size; each node keeps its broker port, controller port and data dir for the
object's life (so a killed node restarts as the same replica); `start()` returns once every node answers
ApiVersions and (`wait_ready`) every node lists all brokers in Metadata; `close()` stops every node and
removes temp data. Config keys in `config` apply to every node, `node_config[n]` to node n only.
"""
from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping

from minikafka.testing import MiniKafka, MiniKafkaError, _Conn, _config_value, _raise_for, free_port

__all__ = ["MiniKafkaCluster"]

# fail-over within seconds, not Kafka's production defaults (tests wait for them)
FAST_FAILOVER = {"controller.quorum.fetch.timeout.ms": "1000", "controller.quorum.election.timeout.ms": "500",
                 "controller.quorum.election.backoff.max.ms": "300", "controller.quorum.request.timeout.ms": "1000",
                 "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                 "replica.lag.time.max.ms": "3000"}


class MiniKafkaCluster:
    """`size` minikafka nodes forming a cluster (see the module docstring). `data_dir`: a root under
    which node N keeps `node<N>/data` (never removed); default: temp dirs removed at close.
    `node_factory(data_dir, config, port)` builds a node (default: MiniKafka)."""

    def __init__(self, size: int = 3, config: Mapping[str, object] | None = None,
                 node_config: Mapping[int, Mapping[str, object]] | None = None,
                 data_dir: str | os.PathLike | None = None, start: bool = True, startup_timeout: float = 30.0,
                 host: str = "127.0.0.1",
                 node_factory: Callable[[Path, dict[str, str], int], MiniKafka] | None = None) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
        self.host = host
        self.ids = list(range(1, size + 1))
        self.startup_timeout = startup_timeout
        self._tmp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="minikafka-cluster-")
        self.root = Path(data_dir) if data_dir is not None else Path(self._tmp.name)
        self.controller_ports = {n: free_port(host) for n in self.ids}
        self.ports = {n: free_port(host) for n in self.ids}
        voters = ",".join(f"{n}@{host}:{p}" for n, p in self.controller_ports.items())
        common = {**FAST_FAILOVER, "default.replication.factor": str(min(3, size)),
                  **{str(k): _config_value(v) for k, v in (config or {}).items()}}
        factory = node_factory or (lambda d, c, p: MiniKafka(config=c, data_dir=d, port=p, start=False,
                                                             host=host, startup_timeout=startup_timeout))
        self.nodes: dict[int, MiniKafka] = {}
        for n in self.ids:
            cfg = {"node.id": str(n), "process.roles": "broker,controller",
                   "listeners": f"PLAINTEXT://{host}:{self.ports[n]},CONTROLLER://{host}:{self.controller_ports[n]}",
                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                   "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
                   "controller.quorum.voters": voters, **common,
                   **{str(k): _config_value(v) for k, v in ((node_config or {}).get(n) or {}).items()}}
            self.nodes[n] = factory(self.root / f"node{n}" / "data", cfg, self.ports[n])
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    # --- addresses ---------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{self.ports[n]}" for n in self.ids)

    def bootstrap_of(self, n: int) -> str:
        return f"{self.host}:{self.ports[n]}"

    # --- life cycle --------------------------------------------------------------------------------
    def start(self) -> "MiniKafkaCluster":
        """Start every node that is not running, then `wait_ready`."""
        for node in self.nodes.values():
            node.start()
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until every running node lists every node as a broker in Metadata (all registered)."""
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        running = [n for n in self.ids if self.nodes[n].alive()]
        while True:
            try:
                if all(len(self._metadata(n, []).brokers) == len(self.ids) for n in running):
                    return
            except (OSError, ConnectionError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise MiniKafkaError(f"the cluster did not form within {timeout or self.startup_timeout}s; "
                                     f"log tails:\n" + "\n".join(f"--- node {n}\n{self.nodes[n].log_text(1500)}"
                                                                 for n in running))
            time.sleep(0.05)

    def kill(self, n: int) -> None:
        """kill -9 node n (its data stays; `start_node(n)` brings it back)."""
        self.resume(n)
        self.nodes[n].kill()

    def stop_node(self, n: int) -> int | None:
        """Clean shutdown of node n (controlled shutdown: it hands its leaderships over first)."""
        self.resume(n)
        return self.nodes[n].stop()

    def start_node(self, n: int) -> None:
        self.nodes[n].start()

    def pause(self, n: int) -> None:
        """SIGSTOP: node n keeps its sockets open but answers nothing (a GC pause, a hung VM)."""
        if self.nodes[n].pid is not None and self.nodes[n].alive():
            os.kill(self.nodes[n].pid, signal.SIGSTOP)

    def resume(self, n: int) -> None:
        if self.nodes[n].pid is not None and self.nodes[n].alive():
            os.kill(self.nodes[n].pid, signal.SIGCONT)

    def stop(self) -> None:
        for n in self.ids:
            self.resume(n)
        for node in self.nodes.values():
            node.stop()

    def close(self) -> None:
        try:
            for n in self.ids:
                self.resume(n)
            for node in self.nodes.values():
                node.close()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()

    def __enter__(self) -> "MiniKafkaCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        alive = [n for n in self.ids if self.nodes[n].alive()]
        return f"MiniKafkaCluster({self.bootstrap_servers}, running={alive})"

    # --- views and admin ---------------------------------------------------------------------------
    def _request(self, n: int, req, resp_cls, version: int):
        conn = _Conn(self.host, self.ports[n], timeout=30.0)
        try:
            return conn.request(req, resp_cls, version)
        finally:
            conn.close()

    def _any_running(self) -> int:
        for n in self.ids:
            if self.nodes[n].alive():
                return n
        raise MiniKafkaError("no node of the cluster is running")

    def _metadata(self, n: int, topics: list[str] | None):
        from kafka.protocol.metadata import MetadataRequest, MetadataResponse
        req = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                                  for t in topics],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        return self._request(n, req, MetadataResponse, 12)

    def leader_of(self, topic: str, partition: int = 0, via: int | None = None) -> int:
        """The partition's leader as node `via` (default: the first running node) sees it; -1 if none."""
        md = self._metadata(via or self._any_running(), [topic])
        for t in md.topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p.leader_id
        return -1

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     config: Mapping[str, object] | None = None, timeout_ms: int = 30000) -> None:
        """CreateTopics (v5) through any running node; raises MiniKafkaError with Kafka's error name."""
        from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
        topic = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(topics=[topic(
            name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
            configs=[topic.CreatableTopicConfig(name=str(k), value=_config_value(v))
                     for k, v in (config or {}).items()])], timeout_ms=timeout_ms, validate_only=False)
        (t,) = self._request(self._any_running(), req, CreateTopicsResponse, 5).topics
        _raise_for(t.error_code, t.error_message, f"create topic {name!r}")
