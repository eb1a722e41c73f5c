"""The state of the share-partitions of one `__share_group_state` partition (Kafka's ShareCoordinatorShard).

Pure: each request yields the records to append and the answer; `replay` applies a record, whether just
appended or read back while loading (the only way state changes). Semantics as Kafka 4.3.1:

- initialize: a ShareSnapshot (snapshot epoch previous + 1, else 0) with the request's state epoch and start
  offset, leader epoch 0, no batches; FENCED_STATE_EPOCH if the stored state epoch is newer.
- write: INVALID_REQUEST on an uninitialized share-partition, FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH when
  the stored epoch is newer (-1 in the request: not checked); then a ShareUpdate (the request's batches merged
  among themselves, start offset -1 = unchanged) or, after `records_per_snapshot` updates, a ShareSnapshot of
  the merged state. A write does not change the leader epoch; only a read does.
- read: INVALID_REQUEST when uninitialized, FENCED_LEADER_EPOCH when older; a read with a new leader epoch
  writes it (a ShareUpdate/ShareSnapshot without batches).
- delete: a tombstone (ShareSnapshot key, null value) if the share-partition exists; success either way.
- summary: start offset, state and leader epochs, delivery complete count (-1/0/0 when unknown).
Every request for a topic id this node's metadata does not have, or a partition beyond it, gets
UNKNOWN_TOPIC_OR_PARTITION (after the checks above, as Kafka orders them).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from minikafka.protocol.errors import (
    FENCED_LEADER_EPOCH,
    FENCED_STATE_EPOCH,
    INVALID_REQUEST,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from minikafka.coordinator.share.combiner import combine
from minikafka.coordinator.share.persister import PartitionState, StateBatch
from minikafka.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareKey,
    ShareSnapshotValue,
    ShareUpdateValue,
)

NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
MESSAGES = {
    FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    FENCED_STATE_EPOCH: "The share coordinator rejected the request because the share-group state epoch did "
                        "not match.",
    UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}

SPKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition): Kafka's SharePartitionKey
Record = tuple[ShareKey, ShareSnapshotValue | ShareUpdateValue | None]


@dataclass(frozen=True)
class ShareState:
    """One share-partition's persisted state (Kafka's ShareGroupOffset)."""
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]
    create_timestamp: int = 0
    write_timestamp: int = 0


def _error(code: int, message: str | None = None) -> PartitionState:
    return PartitionState(error_code=code, error_message=message or MESSAGES.get(code))


class ShareShard:
    """Share-partition states of one coordinator partition; `topic_partitions(topic_id)` is this node's metadata
    (partition count of a topic id, None when unknown)."""

    def __init__(self, records_per_snapshot: int, topic_partitions: Callable[[uuid.UUID], int | None],
                 clock_ms: Callable[[], int]) -> None:
        self.records_per_snapshot = records_per_snapshot
        self.topic_partitions = topic_partitions
        self.clock_ms = clock_ms
        self.states: dict[SPKey, ShareState] = {}
        self.leader_epochs: dict[SPKey, int] = {}
        self.state_epochs: dict[SPKey, int] = {}
        self.update_counts: dict[SPKey, int] = {}
        self.offsets: dict[SPKey, int] = {}  # offset of each share-partition's last snapshot (record pruning)

    # ------------------------------------------------------------------------------------ replay
    def replay(self, key: ShareKey, value: ShareSnapshotValue | ShareUpdateValue | None, offset: int = -1) -> None:
        k = (key.group_id, key.topic_id, key.partition)
        if key.record_type == SHARE_SNAPSHOT:
            if value is None:
                for m in (self.states, self.leader_epochs, self.state_epochs, self.update_counts, self.offsets):
                    m.pop(k, None)
                return
            assert isinstance(value, ShareSnapshotValue)
            self._raise_epoch(self.leader_epochs, k, value.leader_epoch)
            self._raise_epoch(self.state_epochs, k, value.state_epoch)
            self.states[k] = ShareState(value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset,
                                        value.delivery_complete_count, tuple(value.state_batches),
                                        value.create_timestamp, value.write_timestamp)
            if self.update_counts.get(k, 0) >= self.records_per_snapshot and k in self.update_counts:
                self.update_counts[k] = 0
            if offset >= 0:
                self.offsets[k] = offset
        elif key.record_type == SHARE_UPDATE and isinstance(value, ShareUpdateValue):
            self._raise_epoch(self.leader_epochs, k, value.leader_epoch)
            cur = self.states.get(k)
            if cur is None:
                self.states[k] = ShareState(value.snapshot_epoch, 0, value.leader_epoch, value.start_offset,
                                            value.delivery_complete_count, tuple(value.state_batches))
            else:
                start = cur.start_offset if value.start_offset == -1 else value.start_offset
                leader = cur.leader_epoch if value.leader_epoch == -1 else value.leader_epoch
                self.states[k] = replace(cur, start_offset=start, leader_epoch=leader,
                                         delivery_complete_count=value.delivery_complete_count,
                                         state_batches=tuple(combine(list(cur.state_batches),
                                                                     list(value.state_batches), start)))
            self.update_counts[k] = self.update_counts.get(k, 0) + 1

    @staticmethod
    def _raise_epoch(epochs: dict[SPKey, int], k: SPKey, epoch: int) -> None:
        if k not in epochs or epochs[k] < epoch:
            epochs[k] = epoch

    # ------------------------------------------------------------------------------------ checks
    def _unknown_topic(self, topic_id: uuid.UUID, partition: int) -> bool:
        count = self.topic_partitions(topic_id)
        return count is None or count <= partition

    def _fenced(self, epochs: dict[SPKey, int], k: SPKey, epoch: int) -> bool:
        return epoch != -1 and k in epochs and epochs[k] > epoch

    # ------------------------------------------------------------------------------------ requests
    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                   start_offset: int) -> tuple[list[Record], PartitionState]:
        k = (group_id, topic_id, partition)
        if partition < 0:
            return [], _error(INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._fenced(self.state_epochs, k, state_epoch):
            return [], _error(FENCED_STATE_EPOCH)
        if self._unknown_topic(topic_id, partition):
            return [], _error(UNKNOWN_TOPIC_OR_PARTITION)
        cur = self.states.get(k)
        now = self.clock_ms()
        value = ShareSnapshotValue(
            snapshot_epoch=cur.snapshot_epoch + 1 if cur is not None else 0, state_epoch=state_epoch, leader_epoch=0,
            start_offset=start_offset, create_timestamp=now, write_timestamp=now, state_batches=(),
            delivery_complete_count=-1 if start_offset == -1 else 0)
        return [(ShareKey(SHARE_SNAPSHOT, *k), value)], PartitionState()

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
              start_offset: int, batches: Iterable[StateBatch],
              delivery_complete_count: int = -1) -> tuple[list[Record], PartitionState]:
        k = (group_id, topic_id, partition)
        if partition < 0:
            return [], _error(INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if k not in self.states:
            return [], _error(INVALID_REQUEST, WRITE_UNINITIALIZED)
        if self._fenced(self.leader_epochs, k, leader_epoch):
            return [], _error(FENCED_LEADER_EPOCH)
        if self._fenced(self.state_epochs, k, state_epoch):
            return [], _error(FENCED_STATE_EPOCH)
        if self._unknown_topic(topic_id, partition):
            return [], _error(UNKNOWN_TOPIC_OR_PARTITION)
        record = self._state_record(k, leader_epoch, start_offset, list(batches), delivery_complete_count, False)
        return [record], PartitionState()

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
             leader_epoch: int) -> tuple[list[Record], PartitionState]:
        k = (group_id, topic_id, partition)
        if partition < 0:
            return [], _error(INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        cur = self.states.get(k)
        if cur is None:
            return [], _error(INVALID_REQUEST, READ_UNINITIALIZED)
        if self._fenced(self.leader_epochs, k, leader_epoch):
            return [], _error(FENCED_LEADER_EPOCH)
        if self._unknown_topic(topic_id, partition):
            return [], _error(UNKNOWN_TOPIC_OR_PARTITION)
        answer = PartitionState(state_epoch=cur.state_epoch, leader_epoch=cur.leader_epoch,
                                start_offset=cur.start_offset, state_batches=list(cur.state_batches),
                                delivery_complete_count=cur.delivery_complete_count)
        if leader_epoch == -1 or self.leader_epochs.get(k) == leader_epoch:
            return [], answer
        record = self._state_record(k, leader_epoch, cur.start_offset, [], cur.delivery_complete_count, True)
        return [record], answer

    def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                     leader_epoch: int) -> PartitionState:
        if partition < 0:
            return _error(INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown_topic(topic_id, partition):
            return _error(UNKNOWN_TOPIC_OR_PARTITION)
        cur = self.states.get((group_id, topic_id, partition))
        if cur is None:  # Kafka: start offset -1, delivery complete count -1, leader and state epoch 0
            return PartitionState(state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1)
        return PartitionState(state_epoch=cur.state_epoch, leader_epoch=cur.leader_epoch, start_offset=cur.start_offset,
                              delivery_complete_count=cur.delivery_complete_count)

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[list[Record], PartitionState]:
        k = (group_id, topic_id, partition)
        if partition < 0:
            return [], _error(INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown_topic(topic_id, partition):
            return [], _error(UNKNOWN_TOPIC_OR_PARTITION)
        if k not in self.states:
            return [], PartitionState()
        return [(ShareKey(SHARE_SNAPSHOT, *k), None)], PartitionState()

    def tombstones_for_topics(self, topic_ids: set[uuid.UUID]) -> list[Record]:
        """Tombstones of every share-partition of deleted topics (Kafka's maybeCleanupShareState)."""
        return [(ShareKey(SHARE_SNAPSHOT, *k), None) for k in self.states if k[1] in topic_ids]

    def cold_snapshots(self, interval_ms: int) -> list[Record]:
        """A fresh ShareSnapshot (snapshot epoch + 1, write timestamp now) of every share-partition whose last
        snapshot is at least `interval_ms` old, so that pruning can pass its old records (Kafka's
        snapshotColdPartitions; nothing when every state was snapshotted this way already)."""
        if all(st.create_timestamp != st.write_timestamp for st in self.states.values()):
            return []
        now = self.clock_ms()
        out: list[Record] = []
        for k, st in self.states.items():
            if now - st.write_timestamp >= interval_ms:
                out.append((ShareKey(SHARE_SNAPSHOT, *k), ShareSnapshotValue(
                    st.snapshot_epoch + 1, st.state_epoch, st.leader_epoch, st.start_offset, st.create_timestamp,
                    now, st.state_batches, st.delivery_complete_count)))
        return out

    def last_redundant_offset(self) -> int | None:
        """Records before this offset are superseded by later snapshots or tombstones (Kafka's
        ShareCoordinatorOffsetsManager, computed over the live share-partitions): None when nothing can go."""
        if not self.offsets:
            return None
        low = min(self.offsets.values())
        return low if low > 0 else None

    # ------------------------------------------------------------------------------------ records
    def _state_record(self, k: SPKey, leader_epoch: int, start_offset: int, batches: list[StateBatch],
                      delivery_complete_count: int, update_leader_epoch: bool) -> Record:
        """A ShareSnapshot after `records_per_snapshot` updates, else a ShareUpdate (Kafka's
        generateShareStateRecord)."""
        cur = self.states[k]
        leader = cur.leader_epoch
        if update_leader_epoch and leader_epoch != -1:
            leader = leader_epoch
        if self.update_counts.get(k, 0) >= self.records_per_snapshot:
            start = cur.start_offset if start_offset == -1 else start_offset
            now = self.clock_ms()
            return ShareKey(SHARE_SNAPSHOT, *k), ShareSnapshotValue(
                snapshot_epoch=cur.snapshot_epoch + 1, state_epoch=cur.state_epoch, leader_epoch=leader,
                start_offset=start, create_timestamp=now, write_timestamp=now,
                state_batches=tuple(combine(list(cur.state_batches), batches, start)),
                delivery_complete_count=delivery_complete_count)
        return ShareKey(SHARE_UPDATE, *k), ShareUpdateValue(
            snapshot_epoch=cur.snapshot_epoch, leader_epoch=leader, start_offset=start_offset,
            state_batches=tuple(combine([], batches, start_offset)), delivery_complete_count=delivery_complete_count)
