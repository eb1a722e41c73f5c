"""Coordinators on a cluster (imported only there): the group and transaction coordinators coordinate
exactly the partitions of `__consumer_offsets` / `__transaction_state` this node leads.

- Leadership: the replica manager's listener calls `on_leader(topic, p, leader_epoch)` /
  `on_follower(topic, p)`; a new leader replays the partition (COORDINATOR_LOAD_IN_PROGRESS meanwhile)
  with coordinator epoch = the leader epoch, and the transaction coordinator finishes the partition's
  PREPARE_COMMIT/PREPARE_ABORT transactions; a former leader forgets the partition (NOT_COORDINATOR).
- Durability: coordinator appends are answered only once replicated (`replicas.wait_replicated`,
  bounded by offsets.commit.timeout.ms), as Kafka appends them with acks=all.
- Markers go to partition leaders: appended here when this node leads the partition, else one
  WriteTxnMarkers request per leader over the inter-broker listener.
- KIP-890 verification of a transactional produce whose transaction coordinator is another node:
  AddPartitionsToTxn v4 (verify_only, or adding the partition for TV2 clients) to that node.
- The state topics are created through the controller with Kafka 4.3's cluster defaults
  (offsets.topic.replication.factor 3, transaction.state.log.replication.factor 3,
  transaction.state.log.min.isr 2) unless configured.

Invariant: a coordinator answers a request for a key only while this node leads the key's partition
in the epoch it loaded, and only after the records the answer depends on reached the ISR.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import kafka.errors as ke
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from minikafka.protocol.peer_client import PeerClient, PeerError
from minikafka.coordinator.txn.markers import Marker
from minikafka.broker.coordinator_lookup import OFFSETS_TOPIC, TXN_TOPIC, endpoint, partition_leader

log = logging.getLogger(__name__)

MARKERS_VERSION = 1  # WriteTxnMarkers v2 adds transaction_version
VERIFY_VERSION = 4
INTER_BROKER_TIMEOUT_S = 5.0
# Kafka 4.3's defaults for the state topics on a cluster (a single node keeps 1)
CLUSTER_DEFAULTS = {"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
                    "transaction.state.log.min.isr": "2"}
NOT_COORDINATOR = ke.NotCoordinatorError.errno
COORDINATOR_NOT_AVAILABLE = ke.CoordinatorNotAvailableError.errno


def cluster_setting(state: Any, key: str) -> str:
    """A state-topic setting: the configured value, else Kafka's cluster default."""
    return state.config.static_props.get(key) or CLUSTER_DEFAULTS.get(key) or state.config.get(key)


class CoordinatorFailover:
    """Wires `state.groups` / `state.txns` to the cluster (`state.cluster`) and replica manager
    (`state.replicas`). Built once by BrokerState when the cluster runtime is in place."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self._peers: dict[int, PeerClient] = {}
        self._loads: dict[int, asyncio.Task] = {}  # __consumer_offsets partition -> its loading task
        self._deferred: set[asyncio.Task] = set()  # leaderships waiting for the metadata catch-up
        self.commit_timeout_ms = int(state.config.get("offsets.commit.timeout.ms") or 5000)

    # ------------------------------------------------------------------------ coordinators
    def attach_groups(self, groups: Any) -> None:
        groups.enable_partition_ownership(self.replicated, self.append_check)

    def attach_txns(self, txns: Any) -> None:
        txns.txns.enable_partition_ownership(self.replicated, self.append_check)
        txns.markers.enable_routing(self.route, self.send_markers, self.replicated,
                                    self.state.replicas.leader_epoch)

    def start(self) -> None:
        """Coordinators built before the replica manager existed are attached; then leadership changes
        are followed (the replica manager announces the partitions led already at once)."""
        groups_built, txns_built = self.state.coordinators_built()
        if groups_built and self.state.groups.owned is None:
            self.attach_groups(self.state.groups)
        if txns_built and self.state.txns.txns.owned is None:
            self.attach_txns(self.state.txns)
        self.state.replicas.add_leadership_listener(self.on_leader, self.on_follower)

    def on_leader(self, topic: str, partition: int, leader_epoch: int) -> None:
        if topic not in (OFFSETS_TOPIC, TXN_TOPIC):
            return
        caught_up = getattr(self.state.cluster, "caught_up_once", None)
        if caught_up is not None and not caught_up.is_set():
            # a restarted node's image may be stale until it caught up with the metadata log: no
            # coordinator may answer from it (e.g. offsets) before, so the load waits
            task = asyncio.get_running_loop().create_task(self._lead_when_caught_up(caught_up, topic, partition,
                                                                                     leader_epoch))
            self._deferred.add(task)
            task.add_done_callback(self._deferred.discard)
            return
        self._lead(topic, partition, leader_epoch)

    async def _lead_when_caught_up(self, caught_up: asyncio.Event, topic: str, partition: int, epoch: int) -> None:
        await caught_up.wait()
        replicas = self.state.replicas
        if not replicas.leader_error(topic, partition) and replicas.leader_epoch(topic, partition) == epoch:
            self._lead(topic, partition, epoch)

    def _lead(self, topic: str, partition: int, leader_epoch: int) -> None:
        if topic == OFFSETS_TOPIC:
            old = self._loads.pop(partition, None)
            if old is not None:
                old.cancel()
            self._loads[partition] = asyncio.get_running_loop().create_task(
                self.state.groups.load_partition(partition, leader_epoch))
        elif topic == TXN_TOPIC:
            self.state.txns.on_leader(partition, leader_epoch)

    def on_follower(self, topic: str, partition: int) -> None:
        if topic == OFFSETS_TOPIC:
            task = self._loads.pop(partition, None)
            if task is not None:
                task.cancel()
            if self.state.coordinators_built()[0]:
                self.state.groups.unload_partition(partition)
        elif topic == TXN_TOPIC and self.state.coordinators_built()[1]:
            self.state.txns.on_follower(partition)

    def append_check(self, topic: str, partition: int) -> int:
        """0 if a coordinator may append to its partition now (leader, ISR >= min.insync.replicas)."""
        return (self.state.replicas.leader_error(topic, partition)
                or self.state.replicas.min_isr_error(topic, partition))

    async def replicated(self, topic: str, partition: int, end_offset: int) -> int:
        return await self.state.replicas.wait_replicated(topic, partition, end_offset, self.commit_timeout_ms)

    # ------------------------------------------------------------------------ markers
    def route(self, topic: str, partition: int) -> int | None:
        """None when this node leads the partition now, else the leader's id (-1: none known)."""
        leader = partition_leader(self.state, topic, partition)
        if leader == self.state.node_id:
            return None if not self.state.replicas.leader_error(topic, partition) else -1
        return leader

    def _peer(self, node_id: int) -> PeerClient | None:
        address = endpoint(self.state, node_id, self.state.cluster.inter_broker_listener)
        if address is None:
            return None
        peer = self._peers.get(node_id)
        if peer is None or (peer.host, peer.port) != address:
            if peer is not None:
                peer.close()
            peer = self._peers[node_id] = self.state.cluster.peer_factory.inter_broker_client(
                node_id, address, f"coordinator-{self.state.node_id}", INTER_BROKER_TIMEOUT_S)
        return peer

    async def send_markers(self, node_id: int, markers: list[Marker]) -> dict[tuple[str, int], int]:
        """One WriteTxnMarkers request to `node_id`; {(topic, partition): error}; raises on no answer."""
        peer = self._peer(node_id)
        if peer is None:
            raise PeerError(f"node {node_id} has no {self.state.cluster.inter_broker_listener} endpoint")
        W = WriteTxnMarkersRequest.WritableTxnMarker
        by_pid: dict[tuple[str, int], int] = {}
        version = 2 if any(m.transaction_version >= 2 for m in markers) else MARKERS_VERSION
        entries = []
        for m in markers:
            topics: dict[str, list[int]] = {}
            for t, p in m.partitions:
                topics.setdefault(t, []).append(p)
            entries.append(W(producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.commit,
                             topics=[W.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
                             coordinator_epoch=m.coordinator_epoch, transaction_version=m.transaction_version))
        resp = await peer.request(WriteTxnMarkersRequest(markers=entries), version, WriteTxnMarkersResponse)
        for r in resp.markers:
            for t in r.topics:
                for p in t.partitions:
                    by_pid[(t.name, p.partition_index)] = p.error_code
        return by_pid

    # ------------------------------------------------------------------------ KIP-890
    def coordinator_is_remote(self, transactional_id: str) -> int | None:
        """The node coordinating `transactional_id` when it is not this one (-1: none), else None."""
        p = self.state.txns.txns.partition_for(transactional_id)
        leader = partition_leader(self.state, TXN_TOPIC, p)
        return None if leader == self.state.node_id else leader

    async def verify_remote(self, node_id: int, transactional_id: str, producer_id: int, epoch: int,
                            tp: tuple[str, int], add: bool) -> int:
        """AddPartitionsToTxn v4 to the transaction coordinator on `node_id`: is `tp` in the producer's
        open transaction (`add`: add it, TV2)? A coordinator error code when it cannot be asked."""
        peer = self._peer(node_id) if node_id >= 0 else None
        if peer is None:
            return COORDINATOR_NOT_AVAILABLE
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        req = AddPartitionsToTxnRequest(transactions=[T(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, verify_only=not add,
            topics=[T.AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])])])
        try:
            resp = await peer.request(req, VERIFY_VERSION, AddPartitionsToTxnResponse)
        except PeerError as exc:
            log.info("verifying %s with node %d failed: %s", transactional_id, node_id, exc)
            return ke.NetworkExceptionError.errno  # as Kafka's AddPartitionsToTxnManager on a disconnect
        if resp.error_code:
            return resp.error_code
        for r in resp.results_by_transaction:
            for t in r.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) == tp:
                        return p.partition_error_code
        return NOT_COORDINATOR

    # ------------------------------------------------------------------------ state topics
    async def ensure_topic(self, name: str) -> None:
        """Create `name` (a state topic) through the controller unless this node's view has it; returns
        once it has. Raises when the controller refuses (e.g. fewer live brokers than its replication
        factor: FindCoordinator then answers COORDINATOR_NOT_AVAILABLE, as Kafka)."""
        cluster = self.state.cluster
        if name in cluster.image.topics and self.state.catalog.get(name) is not None:
            return
        if name == OFFSETS_TOPIC:
            partitions = int(self.state.config.get("offsets.topic.num.partitions"))
            rf = int(cluster_setting(self.state, "offsets.topic.replication.factor"))
            configs = self.state.groups.topic_configs()
        else:
            partitions = int(self.state.config.get("transaction.state.log.num.partitions"))
            rf = int(cluster_setting(self.state, "transaction.state.log.replication.factor"))
            configs = self.state.txns.txns._topic_configs()
            configs["min.insync.replicas"] = cluster_setting(self.state, "transaction.state.log.min.isr")
        code = await cluster.create_topic(name, partitions, rf, configs, timeout_s=INTER_BROKER_TIMEOUT_S)
        if code and code != ke.TopicAlreadyExistsError.errno:
            raise ke.for_code(code)(f"creating {name}")
        if self.state.catalog.get(name) is None and not await cluster.wait_for_topic(name, INTER_BROKER_TIMEOUT_S):
            raise ke.CoordinatorNotAvailableError(f"{name} not in the local metadata yet")

    def close(self) -> None:
        for peer in self._peers.values():
            peer.close()
        for task in [*self._loads.values(), *self._deferred]:
            task.cancel()
