"""Where a request meets the client quotas (called by the connection once a handler answered, only when
some user / client-id quota exists): Produce records the request's size against producer_byte_rate,
Fetch (consumers only, not follower replicas) the response's size against consumer_byte_rate, every
request but ApiVersions and SASL its handler time against request_percentage. The largest throttle time
goes into the response's throttle_time_ms; the connection then reads nothing from the client for that
long (Kafka 2.0+, KIP-219: answer at once, then mute the channel)."""
from __future__ import annotations

import struct
from typing import Any

from minikafka.broker.quota.manager import FETCH, PRODUCE, REQUEST, ClientQuotaManager
from minikafka.broker.network.response import EncodedBody

PRODUCE_KEY, FETCH_KEY = 0, 1
MUTATIONS = frozenset({19, 20, 37})  # CreateTopics, DeleteTopics, CreatePartitions
EXEMPT = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate
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
    ms = 0
    if api_key == PRODUCE_KEY:
        ms = quotas.record(PRODUCE, principal, client_id, request_size)
    elif api_key == FETCH_KEY and _replica_id(request) < 0:
        size = _size(response)
        if size == 0 and response is not None and not isinstance(response, (bytes, bytearray, EncodedBody)):
            size = 0  # an error answer: nothing fetched
        ms = quotas.record(FETCH, principal, client_id, size)
    elif api_key in MUTATIONS:  # the handler's controller_mutation_rate throttle (KIP-599)
        ms = getattr(response, "throttle_time_ms", 0) or 0
    if api_key not in EXEMPT:
        ms = max(ms, quotas.record(REQUEST, principal, client_id, elapsed_s * 100.0))
    return ms


def set_throttle(api_key: int, version: int, flexible: bool, response: Any, ms: int) -> Any:
    """`response` with throttle_time_ms = `ms` (kafka-python objects; the handlers' own encodings of
    Produce, throttle last, and Fetch, throttle first); anything else is left as it is."""
    if response is None or ms <= 0:
        return response
    if hasattr(response, "throttle_time_ms"):
        try:
            response.throttle_time_ms = ms
        except AttributeError:
            pass
        return response
    if api_key == PRODUCE_KEY and isinstance(response, bytearray):
        _INT32.pack_into(response, len(response) - 4 - (1 if flexible else 0), ms)
    elif api_key == FETCH_KEY and isinstance(response, EncodedBody) and response.parts:
        first = response.parts[0]
        if not isinstance(first, (bytes, bytearray, memoryview)) or len(first) < 4:
            return response
        patched = bytearray(first)
        _INT32.pack_into(patched, 0, ms)
        response.parts[0] = patched
    return response
