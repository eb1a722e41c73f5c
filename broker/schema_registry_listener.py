"""The built-in Schema Registry's wiring (schema_registry/): the `_schemas` topic (compacted, one partition)
created if missing, its partition log handed to the registry's store, the whole partition replayed, then the
REST listener bound. The registry gets the partition log only, nothing else of the broker.

Single node only for now: on a multi-node cluster the `_schemas` partition's leadership would decide which
node may write, which is not wired (start-up refuses the combination).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

    from minikafka.broker.state import BrokerState
    from minikafka.schema_registry.rest import RestServer

log = logging.getLogger(__name__)


def tls_context(state: "BrokerState") -> "ssl.SSLContext":
    """The https listener's server context from the SCHEMA_REGISTRY listener's ssl.* keys (ConfigError if they
    do not make one)."""
    from minikafka.broker.security.tls import build_listener_tls, listener_ssl_props
    from minikafka.schema_registry.listener import LISTENER_NAME
    return build_listener_tls(listener_ssl_props(state.config.get, LISTENER_NAME, "SSL"), LISTENER_NAME).context


async def start_schema_registry(state: "BrokerState", url: str) -> "RestServer":
    """Replay `_schemas` and bind the listener; OSError if the address cannot be bound, ConfigError if an https
    listener's TLS settings are wrong."""
    from minikafka.schema_registry.listener import parse_listener
    from minikafka.schema_registry.registry import SchemaRegistry
    from minikafka.schema_registry.rest import RestServer
    from minikafka.schema_registry.store import TOPIC, TOPIC_CONFIGS, LogStore

    host, port, tls = parse_listener(url)
    context = tls_context(state) if tls else None  # first: a bad keystore fails before anything is written
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
