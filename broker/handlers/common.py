"""Small helpers shared by handlers: partition lookup and leader-epoch checks."""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import kafka.errors as ke
from minikafka.protocol.errors import FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH

if TYPE_CHECKING:
    from minikafka.storage.partition_log import PartitionLog
    from minikafka.broker.state import BrokerState

LEADER_EPOCH = 0  # a single broker is leader of everything, forever, in epoch 0
# Kafka's Topic.isInternal: written only by their coordinators (Produce and DeleteRecords refuse them)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# Kafka's AdminUtils.ADMIN_CLIENT_ID: the one client id whose Produce may append to an internal topic
ADMIN_CLIENT_ID = "__admin_client"
INVALID_TOPIC = ke.InvalidTopicError.errno
ZERO_UUID = uuid.UUID(int=0)


def leader_epoch_error(current_leader_epoch: int) -> int:
    """Error for a client's view of the leader epoch (-1 = no view)."""
    if current_leader_epoch < 0 or current_leader_epoch == LEADER_EPOCH:
        return 0
    return UNKNOWN_LEADER_EPOCH if current_leader_epoch > LEADER_EPOCH else FENCED_LEADER_EPOCH


def lookup_partition(state: BrokerState, topic: str | None, partition: int) -> tuple[PartitionLog | None, int]:
    """(log, 0) or (None, UNKNOWN_TOPIC_OR_PARTITION); on a cluster, a partition that exists but has no
    replica here is NOT_LEADER_OR_FOLLOWER (as Kafka: the client refreshes its metadata)."""
    plog = state.catalog.partition_log(topic, partition) if topic is not None else None
    if plog is None:
        if state.cluster is not None and topic is not None and state.cluster.image.partition(topic, partition):
            return None, ke.NotLeaderForPartitionError.errno
        return None, ke.UnknownTopicOrPartitionError.errno
    return plog, 0


def topic_name_for_id(state: BrokerState, topic_id: uuid.UUID) -> str | None:
    info = state.catalog.by_id.get(topic_id)
    return info.name if info is not None else None


def has_partition(state: BrokerState, topic: str, partition: int) -> bool:
    """Whether the partition exists: on a cluster in the metadata image (this node may host no replica
    of it: the group and transaction coordinators accept any existing partition), else locally."""
    cluster = getattr(state, "cluster", None)
    if cluster is None:
        return state.catalog.has_partition(topic, partition)
    return cluster.image.partition(topic, partition) is not None
