"""The built-in Schema Registry's wiring (schema_registry/), Confluent's model, its state in the compacted
`_schemas` topic (one partition).

Single node: `_schemas` created if missing, its partition log handed to the registry's store, the whole
partition replayed, then the REST listener bound.

Multi-node cluster (broker/schema_registry_cluster.py): every node with `schema.registry.listener` serves the
same registry from memory, kept current from its local replica of `_schemas` partition 0 (only committed
records, below the high watermark). Writes are made by the node leading that partition only, appended as
leader and acknowledged once committed (acks=all); after a failover the new leader applies its whole log
before choosing an id, so ids stay unique and stable. Another node forwards a write over HTTP to the leader's
listener, whose URL every node registers with the controller as a SCHEMA_REGISTRY endpoint of its broker
registration (never shown to Kafka clients), and answers once it applied the write itself; no reachable leader
is Confluent's 50004 / 50003. `_schemas` is created through the controller with replication factor
min(3, live brokers), as Confluent's KafkaStore.

The registry gets the partition log and (on a cluster) the partition's leadership only, nothing else of the
broker.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

    from minikafka.broker.state import BrokerState
    from minikafka.broker.schema_registry_cluster import ClusterRegistry
    from minikafka.schema_registry.rest import RestServer

log = logging.getLogger(__name__)


def tls_context(state: "BrokerState") -> "ssl.SSLContext":
    """The https listener's server context from the SCHEMA_REGISTRY listener's ssl.* keys (ConfigError if they
    do not make one)."""
    from minikafka.broker.security.tls import build_listener_tls, listener_ssl_props
    from minikafka.schema_registry.listener import LISTENER_NAME
    return build_listener_tls(listener_ssl_props(state.config.get, LISTENER_NAME, "SSL"), LISTENER_NAME).context


def client_tls_context(state: "BrokerState") -> "ssl.SSLContext":
    """The client side of the https listeners (a cluster node forwarding to the leader's): the same ssl.* keys'
    truststore verifies the leader (ConfigError if they do not make one)."""
    from minikafka.broker.security.tls import build_client_context, listener_ssl_props
    from minikafka.schema_registry.listener import LISTENER_NAME
    return build_client_context(listener_ssl_props(state.config.get, LISTENER_NAME, "SSL"), LISTENER_NAME)


async def start_schema_registry(state: "BrokerState", url: str) -> "RestServer | ClusterRegistry":
    """Replay `_schemas` and bind the listener (on a cluster: bind, the replay follows in a task); OSError if the
    address cannot be bound, ConfigError if an https listener's TLS settings are wrong."""
    from minikafka.schema_registry.listener import parse_listener
    from minikafka.schema_registry.registry import SchemaRegistry
    from minikafka.schema_registry.rest import RestServer
    from minikafka.schema_registry.store import TOPIC, TOPIC_CONFIGS, LogStore

    host, port, tls = parse_listener(url)
    context = tls_context(state) if tls else None  # first: a bad keystore fails before anything is written
    if state.cluster is not None:
        from minikafka.broker.schema_registry_cluster import start_cluster_registry
        if tls:
            client_tls_context(state)  # a bad truststore fails start-up too
        return await start_cluster_registry(state, host, port, context)
    await state.catalog.create_async(TOPIC, 1, 1, TOPIC_CONFIGS, exist_ok=True)
    plog = state.catalog.partition_log(TOPIC, 0)
    if plog is None:
        raise RuntimeError(f"the {TOPIC} partition 0 is not on this node")
    registry = SchemaRegistry(LogStore(plog))
    await registry.load()
    from minikafka.broker.schema_registry_security import registry_security
    server = RestServer(registry, host, port, ssl_context=context, security=registry_security(state, registry))
    state.schema_registry_metrics = server.metrics  # the minikafka_schema_registry_* series of /metrics
    await server.start()
    log.info("schema registry on %s://%s:%d (%d subjects, %d schema ids, replayed %d %s records)",
             "https" if tls else "http", host, server.port, len(registry.state.subjects), len(registry.state.ids), registry.state.applied, TOPIC)
    return server
