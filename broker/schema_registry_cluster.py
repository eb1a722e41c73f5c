"""The built-in Schema Registry on a node of a multi-node cluster (imported only there), Confluent's model: every
node with `schema.registry.listener` serves the same registry, reads from its own state, kept current from its
local replica of `_schemas` partition 0; writes are made by the node leading that partition (store.py's
ReplicatedLogStore, through the replica manager: appended as leader, acknowledged once committed) and forwarded
there by the others (schema_registry/forwarding.py).

- Discovery: each node registers its registry URL with the controller as one more endpoint of its broker
  registration, under the listener name SCHEMA_REGISTRY (protocol PLAINTEXT for http, SSL for https); the
  leader's URL is that endpoint of the broker the metadata image names as the partition's leader. Clients'
  Metadata never shows it (brokers answer the endpoints of the listener a client is connected to).
- Start-up: the listener binds at once (its port goes into the registration); requests wait (rest.py) until a
  task, once the node caught up with the cluster metadata, has created `_schemas` through the controller if
  missing (one partition, compacted, replication factor min(3, live brokers) as Confluent's
  kafkastore.topic.replication.factor, min.insync.replicas left to the broker default as Confluent leaves it)
  and replayed the local replica.

Invariant: a node answers from records below its replica's high watermark only, and writes only as the
partition's leader after applying its whole log, so ids and versions never repeat across a failover.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minikafka.broker.state import BrokerState
    from minikafka.schema_registry.registry import SchemaRegistry
    from minikafka.schema_registry.rest import RestServer
    from minikafka.schema_registry.store import ReplicatedLogStore

log = logging.getLogger(__name__)

DESIRED_REPLICATION_FACTOR = 3  # Confluent's kafkastore.topic.replication.factor default
BROKERS_WAIT_S = 15.0  # at first creation: how long to wait for the expected brokers to be alive
RETRY_S = 1.0
WILDCARDS = ("", "0.0.0.0", "::")


class SchemasLeadership:
    """store.py's Leadership from the replica manager (which exists once the broker's listeners opened)."""

    def __init__(self, state: "BrokerState") -> None:
        self.state = state

    def leader_error(self) -> int:
        from minikafka.schema_registry.store import TOPIC
        replicas = self.state.replicas
        if replicas is None:
            return 6  # NOT_LEADER_OR_FOLLOWER
        return replicas.leader_error(TOPIC, 0) or replicas.min_isr_error(TOPIC, 0)

    def leader_epoch(self) -> int:
        from minikafka.schema_registry.store import TOPIC
        return self.state.replicas.leader_epoch(TOPIC, 0) if self.state.replicas is not None else -1

    async def wait_committed(self, end_offset: int, timeout_s: float) -> int:
        from minikafka.schema_registry.store import TOPIC
        if self.state.replicas is None:
            return 6
        return await self.state.replicas.wait_replicated(TOPIC, 0, end_offset, int(timeout_s * 1000))


def leader_url(state: "BrokerState") -> str | None:
    """The registry URL of the alive broker leading `_schemas` partition 0, None if unknown or it has none."""
    from minikafka.schema_registry.listener import LISTENER_NAME
    from minikafka.schema_registry.store import TOPIC
    image = state.cluster.image
    info = image.partition(TOPIC, 0)
    if info is None or info.leader < 0:
        return None
    broker = image.brokers.get(info.leader)
    ep = broker.endpoints.get(LISTENER_NAME) if broker is not None and not broker.fenced else None
    if ep is None:
        return None
    host = f"[{ep[0]}]" if ":" in ep[0] else ep[0]
    return f"{'https' if ep[2] == 'SSL' else 'http'}://{host}:{ep[1]}"


class ClusterRegistry:
    """The REST listener and the start-up task of a cluster node's registry (Broker.schema_registry)."""

    def __init__(self, server: "RestServer", task: asyncio.Task) -> None:
        self.server = server
        self.task = task

    @property
    def port(self) -> int:
        return self.server.port

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.server.stop()


async def start_cluster_registry(state: "BrokerState", host: str, port: int, tls: Any) -> ClusterRegistry:
    """Bind the listener and register its endpoint (before the broker registers); the rest in a task."""
    from minikafka.broker.schema_registry_listener import client_tls_context
    from minikafka.schema_registry.forwarding import Forwarder
    from minikafka.schema_registry.listener import LISTENER_NAME
    from minikafka.schema_registry.registry import SchemaRegistry
    from minikafka.schema_registry.rest import RestServer
    from minikafka.schema_registry.store import TOPIC, ReplicatedLogStore

    store = ReplicatedLogStore(lambda: state.catalog.partition_log(TOPIC, 0), SchemasLeadership(state))
    registry = SchemaRegistry(store)
    forwarder = Forwarder(lambda: leader_url(state), client_tls_context(state) if tls is not None else None)
    from minikafka.broker.schema_registry_security import registry_security
    server = RestServer(registry, host, port, ssl_context=tls, forwarder=forwarder,
                        security=registry_security(state, registry))  # a forwarded write is checked again there
    state.schema_registry_metrics = server.metrics  # the minikafka_schema_registry_* series of /metrics
    await server.start()
    cluster = state.cluster
    advertised = host if host not in WILDCARDS else state.advertised_for(cluster.inter_broker_listener).host
    cluster.extra_endpoints.append((LISTENER_NAME, advertised, server.port, "SSL" if tls is not None else "PLAINTEXT"))
    task = asyncio.get_running_loop().create_task(_load(state, registry, store), name="schema-registry-load")
    log.info("schema registry on %s://%s:%d (loading %s once the cluster metadata is caught up)",
             "https" if tls is not None else "http", host, server.port, TOPIC)
    return ClusterRegistry(server, task)


async def _load(state: "BrokerState", registry: "SchemaRegistry", store: "ReplicatedLogStore") -> None:
    from minikafka.schema_registry.store import TOPIC
    cluster = state.cluster
    await cluster.caught_up_once.wait()
    await _ensure_topic(state)
    plog = state.catalog.partition_log(TOPIC, 0)
    if plog is None:
        store.failure = (f"this node holds no replica of {TOPIC} partition 0: give the registry listener to the "
                         f"nodes holding one, or create {TOPIC} with a replica on every registry node")
        log.error("schema registry: %s", store.failure)
        return
    store.plog = plog
    await registry.load()
    store.ready.set()
    log.info("schema registry: replayed %s (%d subjects, %d schema ids, %d records)", TOPIC,
             len(registry.state.subjects), len(registry.state.ids), registry.state.applied)


async def _ensure_topic(state: "BrokerState") -> None:
    """`_schemas` in this node's view, created through the controller if missing (retried until it is)."""
    from minikafka.schema_registry.store import TOPIC, TOPIC_CONFIGS
    cluster = state.cluster
    while not (TOPIC in cluster.image.topics and state.catalog.get(TOPIC) is not None):
        if TOPIC not in cluster.image.topics:
            rf = await _replication_factor(state)
            code = await cluster.create_topic(TOPIC, 1, rf, dict(TOPIC_CONFIGS), timeout_s=10.0)
            if code == 0:
                log.info("schema registry: created %s with replication factor %d%s", TOPIC, rf,
                         "" if rf >= DESIRED_REPLICATION_FACTOR else
                         f", less than the desired {DESIRED_REPLICATION_FACTOR} (fewer live brokers)")
            elif code != 36:  # TOPIC_ALREADY_EXISTS: another node made it
                log.warning("schema registry: creating %s failed with error %d; retrying", TOPIC, code)
                await asyncio.sleep(RETRY_S)
                continue
        await cluster.wait_for_topic(TOPIC, 10.0)


def _live_brokers(state: "BrokerState") -> int:
    return sum(1 for b in state.cluster.image.brokers.values() if not b.fenced)


async def _replication_factor(state: "BrokerState") -> int:
    """min(3, live brokers), as Confluent's KafkaStore; at a cluster's first start the nodes come up together,
    so up to BROKERS_WAIT_S is given for as many to be alive as are registered or are quorum voters."""
    quorum = state.config.quorum
    expected = min(DESIRED_REPLICATION_FACTOR, max(len(state.cluster.image.brokers),
                                                   len(quorum.voters) if quorum is not None else 1))
    deadline = time.monotonic() + BROKERS_WAIT_S
    while _live_brokers(state) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return max(1, min(DESIRED_REPLICATION_FACTOR, _live_brokers(state)))
