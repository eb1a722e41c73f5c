"""Wiring of the share coordinator (coordinator/share/) and the share-group state persister into the broker.

- `build(state)`: the ShareCoordinator over the topic catalog; on a single node it loads an existing
  `__share_group_state` at once; on a cluster (`ShareFailover`) it coordinates exactly the partitions this node
  leads (loaded as it becomes leader, forgotten as it stops), appends are answered once replicated (bounded
  by share.coordinator.write.timeout.ms) and the topic is created through the controller with Kafka's
  cluster defaults (replication factor 3, min.isr 2) unless configured.
- `persister(state)`: single node, `LocalSharePersister`; cluster, `RoutingSharePersister`: the coordinator of
  a key is the leader of its `__share_group_state` partition (what FindCoordinator key type SHARE answers,
  read from this node's metadata image); this node calls its own coordinator, another node gets the state RPC
  over the inter-broker listener. Retriable errors are retried as Kafka's PersisterStateManager does.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from minikafka.protocol.errors import (
    COORDINATOR_NOT_AVAILABLE,
    NETWORK_EXCEPTION,
    TOPIC_ALREADY_EXISTS,
)
from minikafka.coordinator.share.config import SHARE_STATE_TOPIC, ShareCoordinatorConfig
from minikafka.coordinator.share.coordinator import ShareCoordinator
from minikafka.coordinator.share.persister import LocalSharePersister, PartitionState, StateBatch

log = logging.getLogger(__name__)

INTER_BROKER_TIMEOUT_S = 5.0
CLUSTER_DEFAULTS = {"share.coordinator.state.topic.replication.factor": "3",
                    "share.coordinator.state.topic.min.isr": "2"}


def build(state: Any) -> ShareCoordinator:
    from minikafka.broker.errors import error_code
    sc = ShareCoordinator(ShareCoordinatorConfig.from_props(state.config.get), state.catalog, error_code)
    if getattr(state, "cluster", None) is not None:
        failover = ShareFailover(state, sc)
        sc.enable_partition_ownership(failover.replicated, failover.append_check)  # owns nothing yet
        if getattr(state, "replicas", None) is not None:
            failover.start()
        else:  # built in the moment before the replica manager exists (broker/server.py makes it next)
            asyncio.get_running_loop().create_task(failover.start_when_replicating())
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # built outside the event loop (tests): no periodic jobs
        return sc
    sc.start_jobs()
    return sc


def persister(state: Any) -> LocalSharePersister:
    if getattr(state, "cluster", None) is None:
        return LocalSharePersister(state.share_coordinator)
    return RoutingSharePersister(state)


def cluster_setting(state: Any, key: str) -> str:
    """A state-topic setting on a cluster: the configured value, else Kafka's default."""
    return state.config.static_props.get(key) or CLUSTER_DEFAULTS.get(key) or state.config.get(key)


async def ensure_topic(state: Any) -> None:
    """`__share_group_state` exists (created now if not: single node locally, cluster by the controller)."""
    sc = state.share_coordinator
    cluster = getattr(state, "cluster", None)
    if cluster is None:
        await sc.ensure_topic_async()
        return
    if SHARE_STATE_TOPIC in cluster.image.topics and state.catalog.get(SHARE_STATE_TOPIC) is not None:
        return
    configs = sc.topic_configs()
    configs["min.insync.replicas"] = cluster_setting(state, "share.coordinator.state.topic.min.isr")
    rf = int(cluster_setting(state, "share.coordinator.state.topic.replication.factor"))
    code = await cluster.create_topic(SHARE_STATE_TOPIC, sc.config.num_partitions, rf, configs,
                                      timeout_s=INTER_BROKER_TIMEOUT_S)
    if code and code != TOPIC_ALREADY_EXISTS:
        import kafka.errors as ke
        raise ke.for_code(code)(f"creating {SHARE_STATE_TOPIC}")
    if state.catalog.get(SHARE_STATE_TOPIC) is None and not await cluster.wait_for_topic(SHARE_STATE_TOPIC,
                                                                                       INTER_BROKER_TIMEOUT_S):
        raise ConnectionError(f"{SHARE_STATE_TOPIC} not in the local metadata yet")


class ShareFailover:
    """The share coordinator follows the leadership of `__share_group_state` partitions (as the group and
    transaction coordinators do in broker/cluster/coordinator_failover.py)."""

    def __init__(self, state: Any, coordinator: ShareCoordinator) -> None:
        self.state = state
        self.coordinator = coordinator
        self._loads: dict[int, asyncio.Task] = {}

    def start(self) -> None:
        """Follow leadership (the partitions led already are announced at once)."""
        self.state.replicas.add_leadership_listener(self.on_leader, self.on_follower)

    async def start_when_replicating(self) -> None:
        while getattr(self.state, "replicas", None) is None:
            await asyncio.sleep(0.05)
        self.start()

    def append_check(self, topic: str, partition: int) -> int:
        replicas = self.state.replicas
        return replicas.leader_error(topic, partition) or replicas.min_isr_error(topic, partition)

    async def replicated(self, topic: str, partition: int, end_offset: int) -> int:
        return await self.state.replicas.wait_replicated(topic, partition, end_offset,
                                                         self.coordinator.config.write_timeout_ms)

    def on_leader(self, topic: str, partition: int, leader_epoch: int) -> None:
        if topic != SHARE_STATE_TOPIC:
            return
        old = self._loads.pop(partition, None)
        if old is not None:
            old.cancel()
        self._loads[partition] = asyncio.get_running_loop().create_task(self._lead(partition, leader_epoch))

    async def _lead(self, partition: int, epoch: int) -> None:
        caught_up = getattr(self.state.cluster, "caught_up_once", None)
        if caught_up is not None and not caught_up.is_set():
            await caught_up.wait()  # a restarted node's metadata may be stale until then
            replicas = self.state.replicas
            if replicas.leader_error(SHARE_STATE_TOPIC, partition) or \
                    replicas.leader_epoch(SHARE_STATE_TOPIC, partition) != epoch:
                return
        await self.coordinator.load_partition(partition, epoch)

    def on_follower(self, topic: str, partition: int) -> None:
        if topic != SHARE_STATE_TOPIC:
            return
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self.coordinator.unload_partition(partition)


class RoutingSharePersister(LocalSharePersister):
    """Cluster: each call goes to the node leading the key's `__share_group_state` partition."""

    def __init__(self, state: Any) -> None:
        super().__init__(state.share_coordinator)
        self.state = state
        self._peers: dict[int, Any] = {}

    async def _call(self, method: str, group_id: str, topic_id: uuid.UUID, partition: int,
                    *args: Any) -> PartitionState:
        from minikafka.broker.coordinator_lookup import partition_leader
        try:
            await ensure_topic(self.state)
        except Exception as exc:
            log.info("share state topic not available: %s", exc)
            return PartitionState(error_code=COORDINATOR_NOT_AVAILABLE, error_message=str(exc))
        p = self.coordinator.partition_for(group_id, topic_id, partition)
        leader = partition_leader(self.state, SHARE_STATE_TOPIC, p)
        if leader < 0:
            return PartitionState(error_code=COORDINATOR_NOT_AVAILABLE)
        if leader == self.state.node_id:
            return await super()._call(method, group_id, topic_id, partition, *args)
        return await self._remote(leader, method, group_id, topic_id, partition, *args)

    def _peer(self, node_id: int) -> Any:
        from minikafka.broker.coordinator_lookup import endpoint
        cluster = self.state.cluster
        address = endpoint(self.state, node_id, cluster.inter_broker_listener)
        if address is None:
            return None
        peer = self._peers.get(node_id)
        if peer is None or (peer.host, peer.port) != address:
            if peer is not None:
                peer.close()
            peer = self._peers[node_id] = cluster.peer_factory.inter_broker_client(
                node_id, address, f"share-persister-{self.state.node_id}", INTER_BROKER_TIMEOUT_S)
        return peer

    async def _remote(self, node_id: int, method: str, group_id: str, topic_id: uuid.UUID, partition: int,
                      *args: Any) -> PartitionState:
        from minikafka.protocol.peer_client import PeerError
        peer = self._peer(node_id)
        if peer is None:
            return PartitionState(error_code=COORDINATOR_NOT_AVAILABLE)
        req, version, response_class = _request(method, group_id, topic_id, partition, *args)
        try:
            resp = await peer.request(req, version, response_class)
        except PeerError as exc:
            return PartitionState(error_code=NETWORK_EXCEPTION, error_message=str(exc))
        return _answer(method, resp, topic_id, partition)

    def close(self) -> None:
        for peer in self._peers.values():
            peer.close()


def _request(method: str, group_id: str, topic_id: uuid.UUID, partition: int, *args: Any) -> tuple[Any, int, type]:
    """The state RPC of a persister call: (request, version, response class)."""
    from minikafka.protocol import messages as m
    if method == "initialize_state":
        R = m.InitializeShareGroupStateRequest
        P = R.InitializeStateData.PartitionData
        data = R.InitializeStateData(topic_id=topic_id, partitions=[P(partition=partition, state_epoch=args[0],
                                                                      start_offset=args[1])])
        return R(group_id=group_id, topics=[data]), 0, m.InitializeShareGroupStateResponse
    if method == "read_state":
        R = m.ReadShareGroupStateRequest
        P = R.ReadStateData.PartitionData
        data = R.ReadStateData(topic_id=topic_id, partitions=[P(partition=partition, leader_epoch=args[0])])
        return R(group_id=group_id, topics=[data]), 0, m.ReadShareGroupStateResponse
    if method == "write_state":
        R = m.WriteShareGroupStateRequest
        P = R.WriteStateData.PartitionData
        state_epoch, leader_epoch, start_offset, batches, dcc = args
        data = R.WriteStateData(topic_id=topic_id, partitions=[P(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            delivery_complete_count=dcc,
            state_batches=[P.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in batches])])
        return R(group_id=group_id, topics=[data]), 1, m.WriteShareGroupStateResponse
    if method == "delete_state":
        R = m.DeleteShareGroupStateRequest
        P = R.DeleteStateData.PartitionData
        data = R.DeleteStateData(topic_id=topic_id, partitions=[P(partition=partition)])
        return R(group_id=group_id, topics=[data]), 0, m.DeleteShareGroupStateResponse
    R = m.ReadShareGroupStateSummaryRequest
    P = R.ReadStateSummaryData.PartitionData
    data = R.ReadStateSummaryData(topic_id=topic_id, partitions=[P(partition=partition, leader_epoch=args[0])])
    return R(group_id=group_id, topics=[data]), 1, m.ReadShareGroupStateSummaryResponse


def _answer(method: str, resp: Any, topic_id: uuid.UUID, partition: int) -> PartitionState:
    """The key's result in a state RPC's response (Kafka: a missing one is an error)."""
    for t in resp.results:
        if t.topic_id != topic_id:
            continue
        for p in t.partitions:
            if p.partition != partition:
                continue
            if p.error_code:
                return PartitionState(error_code=p.error_code, error_message=p.error_message)
            if method == "read_state":
                return PartitionState(state_epoch=p.state_epoch, start_offset=p.start_offset, state_batches=[
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches])
            if method == "read_state_summary":
                return PartitionState(state_epoch=p.state_epoch, leader_epoch=p.leader_epoch,
                                      start_offset=p.start_offset, delivery_complete_count=p.delivery_complete_count)
            return PartitionState()
    from minikafka.protocol.errors import UNKNOWN_SERVER_ERROR
    return PartitionState(error_code=UNKNOWN_SERVER_ERROR,
                          error_message=f"Failed to {method} for share partition {topic_id}-{partition}")
