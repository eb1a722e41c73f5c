"""The share-partition leader's work (Kafka's SharePartitionManager): the share-partitions of this broker's
partitions per group, loaded from the share coordinator (through the persister) on first use, acquiring
records for ShareFetch, applying acknowledgements, expiring locks and releasing what a departed member held.

Invariants:
- Reading the log and acquiring from what was read happen with no await in between, so two fetches never
  acquire the same offset.
- A state change is written through the persister before the acknowledgement that caused it is answered;
  writes of one share-partition are serialized and always carry its state at the time of the write.
- A share-partition whose persisted state was changed by someone else (FENCED_STATE_EPOCH: offsets were
  altered or deleted) is dropped and loaded again on next use.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from minikafka.coordinator.share.persister import StateBatch
from minikafka.protocol.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_STATE_EPOCH,
    INVALID_REQUEST,
    NOT_COORDINATOR,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from minikafka.protocol.record_batch import iter_headers
from minikafka.broker.share.partition import Acquired, SharePartition, Span

log = logging.getLogger(__name__)

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
_RETRIABLE = (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


@dataclass
class _Entry:
    partition: SharePartition | None = None
    loading: asyncio.Lock = field(default_factory=asyncio.Lock)
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None


@dataclass
class FetchedPartition:
    error: int = 0
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)


def _duration_ms(text: str) -> int | None:
    m = _DURATION.match(text.strip().upper())
    if not m:
        return None
    d, h, mi, s = m.groups()
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(mi or 0)) * 60000 + float(s or 0) * 1000)


class SharePartitionManager:
    def __init__(self, catalog: Any, persister: Any, setting: Callable[[str, str], Any],
                 notify: Callable[[tuple[str, int]], None], leader_epoch: Callable[[str, int], int] = lambda _t, _p: 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.catalog = catalog
        self.persister = persister
        self.setting = setting  # (group id, group config name) -> effective value
        self.notify = notify  # wakes fetches waiting on (topic, partition)
        self.leader_epoch = leader_epoch
        self.clock = clock
        self.entries: dict[Key, _Entry] = {}

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ loading

    async def get(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int) -> tuple[int, SharePartition | None]:
        """(0, the share-partition) or (error code, None)."""
        key = (group_id, topic_id, partition)
        entry = self.entries.setdefault(key, _Entry())
        if entry.partition is not None:
            return 0, entry.partition
        async with entry.loading:
            if entry.partition is not None:
                return 0, entry.partition
            code, sp = await self._load(group_id, topic, topic_id, partition)
            if sp is not None and self.entries.get(key) is entry:
                entry.partition = sp
            return code, sp

    async def _load(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int) -> tuple[int, SharePartition | None]:
        plog = self.catalog.partition_log(topic, partition)
        if plog is None:
            return UNKNOWN_TOPIC_OR_PARTITION, None
        leader_epoch = self.leader_epoch(topic, partition)
        state = await self.persister.read(group_id, topic_id, partition, leader_epoch)
        if state.error_code in _RETRIABLE:
            return state.error_code, None
        limits = dict(max_in_flight=int(self.setting(group_id, "share.partition.max.record.locks")),
                      delivery_limit=int(self.setting(group_id, "share.delivery.count.limit")))
        if state.error_code == INVALID_REQUEST:  # never initialized by the group coordinator: Kafka's answer
            return UNKNOWN_SERVER_ERROR, None
        if state.error_code:
            return state.error_code, None
        epoch = max(state.state_epoch, 0)
        start = state.start_offset
        if start < 0:  # initialized without a start offset: share.auto.offset.reset decides it now
            start = self._reset_offset(group_id, plog)
            written = await self.persister.write(group_id, topic_id, partition, epoch, leader_epoch, start, [])
            if written.error_code:
                return written.error_code, None
        sp = SharePartition(start, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                    for b in state.state_batches],
                            state_epoch=epoch, leader_epoch=leader_epoch, topic_id=topic_id, partition_index=partition,
                            **limits)
        sp.move_start(plog.log_start_offset)
        return 0, sp

    def _reset_offset(self, group_id: str, plog: Any) -> int:
        """Where a share-partition without state starts (share.auto.offset.reset)."""
        policy = str(self.setting(group_id, "share.auto.offset.reset")).strip().lower()
        if policy == "earliest":
            return plog.log_start_offset
        if policy.startswith("by_duration:"):
            ms = _duration_ms(policy.split(":", 1)[1])
            if ms is not None:
                found = plog.offset_for_timestamp(self.now_ms() - ms)
                return found[0] if found is not None else plog.high_watermark
        return plog.high_watermark

    def drop(self, group_id: str, topic_id: uuid.UUID | None = None) -> None:
        """Forget the cached share-partitions of a group (its offsets were altered or deleted)."""
        for key in [k for k in self.entries if k[0] == group_id and (topic_id is None or k[1] == topic_id)]:
            entry = self.entries.pop(key)
            if entry.timer is not None:
                entry.timer.cancel()

    def drop_partition(self, topic: str, partition: int) -> None:
        """Leadership of the partition moved (or its leader epoch changed): every group's share-partition of it
        is forgotten here; the leader loads it from the share coordinator."""
        info = self.catalog.get(topic)
        if info is None:
            return
        for key in [k for k in self.entries if k[1] == info.topic_id and k[2] == partition]:
            entry = self.entries.pop(key)
            if entry.timer is not None:
                entry.timer.cancel()

    # ------------------------------------------------------------------ fetching

    def acquire(self, group_id: str, member_id: str, topic: str, sp: SharePartition, max_records: int,
                max_bytes: int, read_committed: bool, strict: bool) -> FetchedPartition:
        """Read from the share-partition's next offset and acquire; no await inside."""
        plog = self.catalog.partition_log(topic, self._partition_of(sp))
        if plog is None:
            return FetchedPartition(UNKNOWN_TOPIC_OR_PARTITION)
        sp.move_start(plog.log_start_offset)
        if not sp.can_acquire():
            return FetchedPartition()
        offset = sp.next_fetch_offset()
        limit = plog.last_stable_offset if read_committed else plog.high_watermark
        if offset >= limit:
            return FetchedPartition()
        data = plog.read(offset, max(max_bytes, 1), max_offset=limit, min_one=True)
        if not data:
            return FetchedPartition()
        aborted = plog.collect_aborted_txns(offset, limit) if read_committed else []
        spans: list[Span] = []
        ends: list[tuple[int, int]] = []  # (last offset, end position) of each batch read
        for pos, h in iter_headers(data):
            skip = h.is_control or (h.is_transactional and any(
                a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset for a in aborted))
            spans.append(Span(h.base_offset, h.last_offset, skip))
            ends.append((h.last_offset, pos + h.size))
        got = sp.acquire(member_id, spans, max_records, int(self.setting(group_id, "share.record.lock.duration.ms")),
                         self.now_ms(), strict)
        if not got:
            return FetchedPartition()
        last = got[-1].last_offset
        cut = next(end for last_offset, end in ends if last_offset >= last)
        self._arm_timer(group_id, topic, sp)
        return FetchedPartition(0, bytes(data[:cut]), got)

    @staticmethod
    def _partition_of(sp: SharePartition) -> int:
        return sp.partition_index

    # ------------------------------------------------------------------ acknowledging, releasing

    async def acknowledge(self, group_id: str, member_id: str, topic: str, sp: SharePartition,
                          batches: list[tuple[int, int, list[int]]]) -> tuple[int, str | None]:
        """Apply a partition's acknowledgement batches (all or, at the first invalid one, the ones before)
        and persist; (0, None) or the error code and message."""
        lock_ms = int(self.setting(group_id, "share.record.lock.duration.ms"))
        code, message = 0, None
        now = self.now_ms()
        changed = False
        for first, last, types in batches:
            code, message = sp.acknowledge(member_id, first, last, types, now, lock_ms)
            if code:
                break
            changed = True
        if changed:
            written = await self.persist(group_id, topic, sp)
            if not code and written:
                code, message = written, None
            self.notify((topic, self._partition_of(sp)))
        return code, message

    def release_member(self, group_id: str, member_id: str, partitions: list[tuple[str, uuid.UUID, int]] | None = None) -> None:
        """Records held by a member whose share session closed (final epoch, or its connection closed) become
        available again."""
        for (g, topic_id, p), entry in list(self.entries.items()):
            sp = entry.partition
            if g != group_id or sp is None:
                continue
            if partitions is not None and not any(t == topic_id and q == p for _n, t, q in partitions):
                continue
            if sp.release_member(member_id):
                topic = self._topic_name(topic_id)
                if topic is not None:
                    self._persist_soon(group_id, topic, sp)
                    self.notify((topic, p))

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.catalog.by_id.get(topic_id)
        return info.name if info is not None else None

    def _arm_timer(self, group_id: str, topic: str, sp: SharePartition) -> None:
        entry = self.entries.get((group_id, sp.topic_id, sp.partition_index))
        if entry is None or entry.partition is not sp:
            return  # a share-partition dropped meanwhile: the one loaded in its place keeps its own timer
        deadline = sp.next_deadline()
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(deadline - self.now_ms(), 0) / 1000
        entry.timer = loop.call_later(delay, self._expire, group_id, topic, sp)

    def _expire(self, group_id: str, topic: str, sp: SharePartition) -> None:
        entry = self.entries.get((group_id, sp.topic_id, sp.partition_index))
        if entry is None or entry.partition is not sp:
            return
        entry.timer = None
        if sp.expire_locks(self.now_ms()):
            self._persist_soon(group_id, topic, sp)
            self.notify((topic, sp.partition_index))
        self._arm_timer(group_id, topic, sp)

    def _persist_soon(self, group_id: str, topic: str, sp: SharePartition) -> None:
        task = asyncio.get_running_loop().create_task(self.persist(group_id, topic, sp))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def persist(self, group_id: str, topic: str, sp: SharePartition) -> int:
        """Write the share-partition's current state; 0 or the error code."""
        key = (group_id, sp.topic_id, sp.partition_index)
        entry = self.entries.get(key)
        if entry is None or entry.partition is not sp:
            return 0  # dropped meanwhile: its state was replaced
        async with entry.writing:
            batches = [StateBatch(f, l, s, c) for f, l, s, c in sp.state_batches()]
            done = sum(1 for o in range(sp.start, sp.end) if sp.records[o].state in (2, 4))
            result = await self.persister.write(group_id, sp.topic_id, sp.partition_index,
                                                sp.state_epoch, sp.leader_epoch, sp.start, batches, done)
        if result.error_code == FENCED_STATE_EPOCH:
            self.drop(group_id, sp.topic_id)
        elif result.error_code:
            log.warning("share group %s: persisting %s-%d failed: %s", group_id, topic, sp.partition_index,
                        result.error_code)
        return result.error_code
