"""Which node coordinates a group or transactional id: the leader of the key's partition of its state
topic (`__consumer_offsets` / `__transaction_state`), as Kafka's FindCoordinator answers.

On a single node (`state.cluster is None`) this node leads every partition. On a cluster the
metadata image says who leads; a partition without a leader (or whose leader has no endpoint on the
asking listener) has no coordinator: COORDINATOR_NOT_AVAILABLE, the client retries.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import kafka.errors as ke

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
GROUP, TRANSACTION = 0, 1
COORDINATOR_NOT_AVAILABLE = ke.CoordinatorNotAvailableError.errno


class CoordinatorAddress(NamedTuple):
    error_code: int
    node_id: int = -1
    host: str = ""
    port: int = -1


def state_partition(state: Any, key_type: int, key: str) -> tuple[str, int]:
    """The (state topic, partition) holding `key`."""
    if key_type == GROUP:
        return OFFSETS_TOPIC, state.groups.partition_for(key)
    return TXN_TOPIC, state.txns.txns.partition_for(key)


def partition_leader(state: Any, topic: str, partition: int) -> int:
    """The node leading `topic`-`partition` (-1 if none); this node on a single node."""
    cluster = getattr(state, "cluster", None)
    if cluster is None:
        return state.node_id
    info = cluster.image.partition(topic, partition)
    return -1 if info is None else info.leader


def endpoint(state: Any, node_id: int, listener: str) -> tuple[str, int] | None:
    """(host, port) of `node_id` on the listener named `listener`; None if it has none."""
    cluster = getattr(state, "cluster", None)
    if cluster is None or node_id == state.node_id:
        adv = state.advertised_for(listener)
        return adv.host, adv.port
    broker = cluster.image.brokers.get(node_id)
    if broker is None or broker.fenced:
        return None
    ep = broker.endpoints.get(listener)
    return None if ep is None else (ep[0], ep[1])


def find(state: Any, key_type: int, key: str, listener: str) -> CoordinatorAddress:
    """The coordinator of `key` as seen from clients of `listener`."""
    topic, partition = state_partition(state, key_type, key)
    leader = partition_leader(state, topic, partition)
    if leader < 0:
        return CoordinatorAddress(COORDINATOR_NOT_AVAILABLE)
    address = endpoint(state, leader, listener)
    if address is None:
        return CoordinatorAddress(COORDINATOR_NOT_AVAILABLE)
    return CoordinatorAddress(0, leader, *address)
