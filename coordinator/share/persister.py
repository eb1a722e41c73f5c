"""The share-group state persister (Kafka's `Persister`, server-common/share/persister): what a share-partition
leader calls to initialize, read, write and delete the durable state of a share-partition, wherever its share
coordinator runs.

`LocalSharePersister` calls the share coordinator of this node directly (a single node); on a cluster the broker's
`RoutingSharePersister` (broker/share_coordination.py, same API) sends each call to the node coordinating the
key (the leader of its `__share_group_state` partition) as the state RPC. Use `state.share_persister`.
Errors come back as `PartitionState.error_code` (Kafka's codes), never as exceptions: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE are retriable,
FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH / INVALID_REQUEST / UNKNOWN_TOPIC_OR_PARTITION are not.
"""
from __future__ import annotations

import asyncio
import logging
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from minikafka.protocol.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NETWORK_EXCEPTION,
    NOT_COORDINATOR,
    REQUEST_TIMED_OUT,
    UNKNOWN_TOPIC_OR_PARTITION,
)

log = logging.getLogger(__name__)

AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVED = 4

# Kafka's PersisterStateManager: retriable errors, 1 s backoff doubling up to 30 s, 5 attempts
RETRIABLE = frozenset({COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
                       UNKNOWN_TOPIC_OR_PARTITION, NETWORK_EXCEPTION, REQUEST_TIMED_OUT})
REQUEST_BACKOFF_MS = 1000
REQUEST_BACKOFF_MAX_MS = 30000
MAX_ATTEMPTS = 5


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
    share-partition's request to it, answered once the resulting records are durable.

    Retriable errors (the coordinator is loading, moved, not available; the topic not in its metadata yet) are
    retried as Kafka's PersisterStateManager does: up to `max_attempts` tries, exponential backoff from
    `backoff_ms` (x2, at most 30 s, 20% jitter); the last error is answered with "Error in <op> state RPC."
    before its message. Subclasses route a call elsewhere by overriding `_call`."""

    def __init__(self, share_coordinator: Any, backoff_ms: int = REQUEST_BACKOFF_MS,
                 max_attempts: int = MAX_ATTEMPTS) -> None:
        self.coordinator = share_coordinator
        self.backoff_ms = backoff_ms
        self.max_attempts = max_attempts

    async def _call(self, method: str, group_id: str, topic_id: uuid.UUID, partition: int,
                    *args: Any) -> PartitionState:
        return await getattr(self.coordinator, method)(group_id, topic_id, partition, *args)

    async def _retrying(self, op: str, method: str, *args: Any) -> PartitionState:
        delay = self.backoff_ms
        for attempt in range(1, self.max_attempts + 1):
            result = await self._call(method, *args)
            if result.error_code not in RETRIABLE:
                return result
            if attempt == self.max_attempts:
                log.info("%s state RPC for %s: retries exhausted (error %d)", op, args[:3], result.error_code)
                break
            await asyncio.sleep(min(delay, REQUEST_BACKOFF_MAX_MS) * random.uniform(0.8, 1.2) / 1000)
            delay *= 2
        return PartitionState(error_code=result.error_code,
                              error_message=f"Error in {op} state RPC. Exhausted max retries to complete {op} state "
                                            "RPC without success.")

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> PartitionState:
        return await self._retrying("initialize", "initialize_state", group_id, topic_id, partition, state_epoch,
                                    start_offset)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionState:
        return await self._retrying("read", "read_state", group_id, topic_id, partition, leader_epoch)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch],
                    delivery_complete_count: int = -1) -> PartitionState:
        return await self._retrying("write", "write_state", group_id, topic_id, partition, state_epoch,
                                    leader_epoch, start_offset, batches, delivery_complete_count)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> PartitionState:
        return await self._retrying("delete", "delete_state", group_id, topic_id, partition)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> PartitionState:
        return await self._retrying("read summary", "read_state_summary", group_id, topic_id, partition,
                                    leader_epoch)
