"""The share-group state persister (Kafka's `Persister`, server-common/share/persister): what a share-partition
leader calls to initialize, read, write and delete the durable state of a share-partition, wherever its share
coordinator runs.

`LocalSharePersister` calls the share coordinator of this node directly (a single node, or a cluster node
that coordinates the key). Errors come back as `PartitionState.error_code` (Kafka's codes), never as
exceptions: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE are retriable,
FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH / INVALID_REQUEST / UNKNOWN_TOPIC_OR_PARTITION are not.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVED = 4


@dataclass(frozen=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int   # 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED
    delivery_count: int


@dataclass
class PartitionState:
    error_code: int = 0
    error_message: str | None = None
    state_epoch: int = -1
    leader_epoch: int = -1
    start_offset: int = -1          # -1: not initialized
    state_batches: list[StateBatch] = field(default_factory=list)
    # KIP-1226 (WriteShareGroupState v1 / ReadShareGroupStateSummary v1): how many offsets >= start_offset have
    # completed delivery (acknowledged or archived), as last written by the partition leader; -1 unknown
    delivery_complete_count: int = -1


class SharePersister(Protocol):
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> PartitionState: ...

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionState: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch],
                    delivery_complete_count: int = -1) -> PartitionState: ...  # only error fields meaningful

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> PartitionState: ...

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> PartitionState: ...


class LocalSharePersister:
    """The persister over the share coordinator of this node (`ShareCoordinator`): each call is one
    share-partition's request to it, answered once the resulting records are durable."""

    def __init__(self, share_coordinator: Any) -> None:
        self.coordinator = share_coordinator

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> PartitionState:
        return await self.coordinator.initialize_state(group_id, topic_id, partition, state_epoch, start_offset)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionState:
        return await self.coordinator.read_state(group_id, topic_id, partition, leader_epoch)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch],
                    delivery_complete_count: int = -1) -> PartitionState:
        return await self.coordinator.write_state(group_id, topic_id, partition, state_epoch, leader_epoch,
                                                  start_offset, batches, delivery_complete_count)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> PartitionState:
        return await self.coordinator.delete_state(group_id, topic_id, partition)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> PartitionState:
        return await self.coordinator.read_state_summary(group_id, topic_id, partition, leader_epoch)
