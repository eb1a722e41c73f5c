"""Where a request meets the client quotas (called by the connection once a handler answered, only when
some user / client-id quota exists): Produce records the request's size against producer_byte_rate,
Fetch (consumers only, not follower replicas) the response's size against consumer_byte_rate, every
request but ApiVersions and SASL its handler time against request_percentage. The largest throttle time
goes into the response's throttle_time_ms; the connection then reads nothing from the client for that
long (Kafka 2.0+, KIP-219: answer at once, then mute the channel)."""
from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.consumer import FetchResponse

from minikafka.broker.quota.manager import FETCH, PRODUCE, REQUEST, ClientQuotaManager
from minikafka.broker.network.response import EncodedBody

PRODUCE_KEY, FETCH_KEY = 0, 1
MUTATIONS = frozenset({19, 20, 37})  # CreateTopics, DeleteTopics, CreatePartitions
# not counted against request_percentage: SaslHandshake, ApiVersions, SaslAuthenticate and what brokers
# send each other (WriteTxnMarkers, AlterPartition, Envelope, registration, heartbeats, producer id blocks);
# Kafka exempts its brokers' requests (CLUSTER_ACTION) the same way
EXEMPT = frozenset({17, 18, 27, 36, 56, 58, 62, 63, 67})
_INT32 = struct.Struct(">i")


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None and getattr(state, "replica_id", -1) >= 0:
        return state.replica_id
    rid = getattr(request, "replica_id", -1)
    return rid if isinstance(rid, int) else -1


def _size(response: Any) -> int:
    if isinstance(response, EncodedBody):
        return response.size
    if isinstance(response, (bytes, bytearray)):
        return len(response)
    return 0


def throttle_ms(quotas: ClientQuotaManager, api_key: int, request: Any, request_size: int, response: Any,
                principal: str, client_id: str | None, elapsed_s: float) -> int:
    ms, size, consumer_fetch = 0, 0, False
    if api_key == FETCH_KEY and _replica_id(request) >= 0:
        return 0  # replication is never throttled by client quotas
    if api_key == PRODUCE_KEY:
        ms = quotas.record(PRODUCE, principal, client_id, request_size)
    elif api_key == FETCH_KEY:
        size, consumer_fetch = _size(response), True
        ms = quotas.record(FETCH, principal, client_id, size)
    elif api_key in MUTATIONS:  # the handler's controller_mutation_rate throttle (KIP-599)
        ms = getattr(response, "throttle_time_ms", 0) or 0
    if api_key not in EXEMPT:
        ms = max(ms, quotas.record(REQUEST, principal, client_id, elapsed_s * 100.0))
    if consumer_fetch and ms > 0:
        # Kafka answers a throttled fetch empty, so what was fetched is not counted (unrecordQuotaSensor)
        quotas.unrecord(FETCH, principal, client_id, size)
    return ms


def set_throttle(api_key: int, version: int, flexible: bool, response: Any, ms: int) -> Any:
    """`response` with throttle_time_ms = `ms` (kafka-python objects; the Produce handler's own encoding,
    throttle last); a consumer's Fetch becomes an empty answer, as Kafka's throttled fetch is."""
    if response is None or ms <= 0:
        return response
    if api_key == FETCH_KEY and (isinstance(response, EncodedBody) or getattr(response, "error_code", 1) == 0):
        # Kafka's getThrottledResponse: no partitions (the consumer fetches them again after the throttle)
        if isinstance(response, EncodedBody):
            response.close()
        return FetchResponse(throttle_time_ms=ms, error_code=0, session_id=0, responses=[])
    if hasattr(response, "throttle_time_ms"):
        try:
            response.throttle_time_ms = ms
        except AttributeError:
            pass
        return response
    if api_key == PRODUCE_KEY and isinstance(response, bytearray):
        _INT32.pack_into(response, len(response) - 4 - (1 if flexible else 0), ms)
    return response
