"""Committed offsets per group, plus transactional offset commits pending their transaction marker.

`OffsetStore` is the in-memory view of the OffsetCommit records of `__consumer_offsets`. The
pending structure is the hook for transactions (TxnOffsetCommit): offsets are staged per producer
id with `stage_transactional`; the COMMIT/ABORT marker written to the group's partition then calls
`complete_transaction(producer_id, commit)`. While a partition has a staged offset, OffsetFetch with
`require_stable` answers UNSTABLE_OFFSET_COMMIT for it, and retention does not expire it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # explicit expiry (OffsetCommit v2-v4 retention_time_ms); -1 = none
    record_offset: int = -1  # offset of the record in __consumer_offsets


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # producer id -> group -> (topic, partition) -> staged offset
        self._pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        # group -> producer ids with staged offsets for it
        self._open_txns: dict[str, set[int]] = {}

    # ------------------------------------------------------------------------------ committed

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group, {}).get(topic, {}).get(partition)

    def put(self, group: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self._offsets.setdefault(group, {}).setdefault(topic, {})[partition] = value

    def delete(self, group: str, topic: str, partition: int) -> bool:
        topics = self._offsets.get(group)
        if topics is None or partition not in topics.get(topic, {}):
            return False
        del topics[topic][partition]
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self._offsets[group]
        return True

    def group_offsets(self, group: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self._offsets.get(group, {})

    def partitions(self, group: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        for topic, parts in list(self._offsets.get(group, {}).items()):
            for partition, value in list(parts.items()):
                yield topic, partition, value

    def has_offsets(self, group: str) -> bool:
        return group in self._offsets

    def groups(self) -> list[str]:
        return list(self._offsets)

    def delete_group(self, group: str) -> list[TopicPartition]:
        gone = [(t, p) for t, p, _ in self.partitions(group)]
        self._offsets.pop(group, None)
        return gone

    # ------------------------------------------------------------------------------ transactional

    def stage_transactional(self, producer_id: int, group: str, topic: str, partition: int,
                            value: OffsetAndMetadata) -> None:
        self._pending.setdefault(producer_id, {}).setdefault(group, {})[(topic, partition)] = value
        self._open_txns.setdefault(group, set()).add(producer_id)

    def complete_transaction(self, producer_id: int, commit: bool) -> list[tuple[str, str, int]]:
        """Apply (commit) or drop (abort) the producer's staged offsets; returns (group, topic,
        partition) of those applied. A staged offset only replaces a committed one that was written
        to the log before it (Kafka compares record offsets)."""
        staged = self._pending.pop(producer_id, {})
        applied = []
        for group, offsets in staged.items():
            pids = self._open_txns.get(group)
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del self._open_txns[group]
            if not commit:
                continue
            for (topic, partition), value in offsets.items():
                current = self.get(group, topic, partition)
                if current is None or current.record_offset < value.record_offset:
                    self.put(group, topic, partition, value)
                    applied.append((group, topic, partition))
        return applied

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        for pid in self._open_txns.get(group, ()):
            if (topic, partition) in self._pending.get(pid, {}).get(group, {}):
                return True
        return False

    def has_open_transactions(self, group: str) -> bool:
        return bool(self._open_txns.get(group))

    def open_transaction_groups(self) -> list[str]:
        """The groups with transactional offsets staged and not yet completed by a marker."""
        return list(self._open_txns)

    def drop_pending_for_group(self, group: str) -> None:
        for pid in self._open_txns.pop(group, set()):
            self._pending.get(pid, {}).pop(group, None)

    # ------------------------------------------------------------------------------ retention

    def expired(self, group: str, now_ms: int, retention_ms: int, base_timestamp: Callable[[OffsetAndMetadata], int],
                is_subscribed: Callable[[str], bool]) -> tuple[list[TopicPartition], bool]:
        """(partitions whose offsets expired, whether all of the group's offsets expired), as Kafka's
        cleanupExpiredOffsets: offsets of subscribed topics and ones with a pending transactional
        commit are kept."""
        expired: list[TopicPartition] = []
        all_expired = True
        for topic, parts in self._offsets.get(group, {}).items():
            if is_subscribed(topic):
                all_expired = False
                continue
            for partition, value in parts.items():
                if value.expire_timestamp >= 0:
                    gone = now_ms >= value.expire_timestamp
                else:
                    gone = now_ms - base_timestamp(value) >= retention_ms
                if gone and not self.has_pending(group, topic, partition):
                    expired.append((topic, partition))
                else:
                    all_expired = False
        return expired, all_expired and not self.has_open_transactions(group)
