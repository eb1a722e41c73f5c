"""AlterPartition (API 56, v3: topic ids, ISR with broker epochs) from a partition leader to the
active controller, through `state.cluster.controller_request` (which retries NOT_CONTROLLER)."""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minikafka.broker.replication.replica_manager import ReplicaManager

ALTER_PARTITION_VERSION = 3
LEADER_RECOVERED = 0


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, (bytes, bytearray)):
        return uuid.UUID(bytes=bytes(value))
    return uuid.UUID(str(value))


async def send_alter_partition(manager: ReplicaManager, topic: str, partition: int, leader_epoch: int,
                               partition_epoch: int, isr: tuple[int, ...]) -> tuple[int, tuple[int, ...], int, int]:
    """(error code, ISR, partition epoch, leader epoch) as the controller answers for the partition."""
    from minikafka.protocol.messages import AlterPartitionRequest, AlterPartitionResponse
    image = manager.cluster.image
    topic_image = image.topics.get(topic)
    if topic_image is None:
        return 3, (), -1, -1  # UNKNOWN_TOPIC_OR_PARTITION: deleted meanwhile
    me = image.brokers.get(manager.node_id)
    Topic = AlterPartitionRequest.TopicData
    Partition = Topic.PartitionData
    Member = Partition.BrokerState
    req = AlterPartitionRequest(
        broker_id=manager.node_id, broker_epoch=me.epoch if me is not None else -1,
        topics=[Topic(topic_id=_uuid(topic_image.topic_id), partitions=[Partition(
            partition_index=partition, leader_epoch=leader_epoch,
            new_isr_with_epochs=[Member(broker_id=b, broker_epoch=image.brokers[b].epoch if b in image.brokers else -1)
                                 for b in isr],
            leader_recovery_state=LEADER_RECOVERED, partition_epoch=partition_epoch)])])
    resp = await manager.cluster.controller_request(req, ALTER_PARTITION_VERSION, AlterPartitionResponse)
    if resp.error_code:
        return resp.error_code, (), -1, -1
    for t in resp.topics:
        for p in t.partitions:
            if p.partition_index == partition:
                return p.error_code, tuple(p.isr), p.partition_epoch, p.leader_epoch
    return 3, (), -1, -1
