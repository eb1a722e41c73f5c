"""What the group coordinator's parts share (Kafka's CoordinatorRuntime, for `__consumer_offsets`): config,
the clock, which partitions this node coordinates and in which epoch, their loading state, record appends
and how long until they are replicated, and keyed timers.

Runs on the event loop thread only. An append is synchronous (the ordinary partition-log interface with
AppendOrigin.COORDINATOR); on a cluster it is made only in a partition this node owns, with that
partition's leader epoch, and `durable` / `committed_view` wait for its replication before an answer or a
read. Nothing here knows what a group is.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Iterable

import kafka.errors as ke

from minikafka.coordinator.group.errors import OFFSETS_TOPIC, AppendFailed
from minikafka.coordinator.group.metadata import GroupError, group_error
from minikafka.coordinator.group.records import build_batch
from minikafka.coordinator.partitioning import partition_for
from minikafka.storage.partition_log import AppendOrigin

log = logging.getLogger(__name__)

READ_BARRIER_ROUNDS = 3  # committed_view: replication waits before a read goes ahead regardless
# replication errors of a coordinator append -> what Kafka's coordinator answers (it lost leadership,
# or the write did not reach enough replicas in time)
_COORDINATOR_ERRORS = {
    ke.NotLeaderForPartitionError.errno: ke.NotCoordinatorError.errno,
    ke.NotEnoughReplicasError.errno: ke.CoordinatorNotAvailableError.errno,
    ke.NotEnoughReplicasAfterAppendError.errno: ke.CoordinatorNotAvailableError.errno,
    ke.RequestTimedOutError.errno: ke.CoordinatorNotAvailableError.errno,
    ke.UnknownTopicOrPartitionError.errno: ke.CoordinatorNotAvailableError.errno,
}


class GroupRuntime:
    """Partitions, appends and timers of `__consumer_offsets` for every group part of this broker."""

    def __init__(self, config: Any, catalog: Any, error_code: Callable[[BaseException], int],
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config  # GroupConfig
        self.catalog = catalog  # broker TopicCatalog: get / create / partition_log / topics / by_id
        self.error_code = error_code  # broker's exception -> Kafka error code mapping
        self._clock = clock
        self._loaded: set[int] = set()
        self._loading: set[int] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._topic_ready = False
        # On a cluster (`enable_partition_ownership`): partition -> coordinator epoch of the partitions this
        # node leads. None on a single node, which coordinates every partition in epoch 0.
        self.owned: dict[int, int] | None = None
        # async (topic, partition, end_offset) -> error code: waits until an append is replicated
        # (ReplicaManager.wait_replicated with a bound); None on a single node
        self.replication: Callable[[str, int, int], Awaitable[int]] | None = None
        self._append_end: dict[int, int] = {}  # partition -> end offset of this node's last append
        self._group_end: dict[str, int] = {}  # group -> end offset of its last append not yet seen replicated
        self.append_check: Callable[[str, int], int] = lambda _t, _p: 0

    # ============================================================== clock, partitions, topic

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    @property
    def topic_exists(self) -> bool:
        if not self._topic_ready and self.catalog.get(OFFSETS_TOPIC) is not None:
            self._topic_ready = True
        return self._topic_ready

    def topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        }

    def ensure_topic(self) -> None:
        """Create __consumer_offsets on first use (Kafka creates it on the first FindCoordinator).
        Synchronous (partition files made in the calling thread): tests and fallback only; the broker
        calls `ensure_topic_async` from FindCoordinator and Metadata."""
        if self.topic_exists:
            return
        if self.owned is not None:  # a cluster: only the controller creates it (FindCoordinator does)
            raise group_error(ke.CoordinatorNotAvailableError)
        is_creating = getattr(self.catalog, "is_creating", None)
        if is_creating is not None and is_creating(OFFSETS_TOPIC):
            # `ensure_topic_async` (start-up warm-up, FindCoordinator) is making it: retriable, as Kafka
            # answers while its coordinator loads
            raise group_error(ke.CoordinatorLoadInProgressError)
        self.catalog.create(OFFSETS_TOPIC, self.config.num_partitions, 1, self.topic_configs(), internal=True)
        self._topic_ready = True
        self._loaded.update(range(self.config.num_partitions))  # new and empty: nothing to load

    async def ensure_topic_async(self) -> None:
        """`ensure_topic` with the partition files made off the event loop; concurrent callers share
        one creation."""
        if self.topic_exists:
            return
        await self.catalog.create_async(OFFSETS_TOPIC, self.config.num_partitions, 1, self.topic_configs(),
                                        internal=True, exist_ok=True)
        self._topic_ready = True
        if self.owned is None:  # on a cluster partitions are loaded as this node becomes their leader
            self._loaded.update(range(self.config.num_partitions))  # new and empty: nothing to load

    def mark_loading(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self._loading.add(p)
            self._loaded.discard(p)

    def mark_loaded(self, partition: int) -> None:
        self._loading.discard(partition)
        self._loaded.add(partition)

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def any_loading(self) -> bool:
        return bool(self._loading)

    def check_partition(self, group_id: str, create: bool = False) -> int:
        """The group's partition, after making sure it is owned and loaded."""
        if create:
            self.ensure_topic()
        partition = self.partition_for(group_id)
        if partition in self._loading:
            raise group_error(ke.CoordinatorLoadInProgressError)
        if self.owned is not None and partition not in self.owned:
            raise group_error(ke.NotCoordinatorError)
        return partition

    def coordinator_epoch(self, partition: int) -> int:
        """The leader epoch of `partition` this node coordinates it in (0 on a single node, -1 if not owned)."""
        if self.owned is None:
            return 0
        return self.owned.get(partition, -1)

    def enable_partition_ownership(self, replication: Callable[[str, int, int], Awaitable[int]],
                                   append_check: Callable[[str, int], int] = lambda _t, _p: 0) -> None:
        """Cluster mode: own no partition until it is loaded (this node became the leader of that
        `__consumer_offsets` partition); appends wait for `replication` before answers, and are not made
        while `append_check(topic, partition)` answers an error (Kafka's acks=all checks before an
        append: leadership, min.insync.replicas)."""
        self.owned = {}
        self.replication = replication
        self.append_check = append_check
        self._loaded.clear()

    def forget_partition(self, partition: int) -> None:
        """Neither loading nor loaded, no append of it awaited."""
        self._loading.discard(partition)
        self._loaded.discard(partition)
        self._append_end.pop(partition, None)
        for group_id in [g for g in self._group_end if self.partition_for(g) == partition]:
            del self._group_end[group_id]

    # ============================================================== appends and their replication

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]], errors: dict[int, int], *,
               producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append records for `group_id`'s partition; returns the first offset or raises AppendFailed with
        the code `errors` maps the failure to (Kafka's appendGroupMetadataErrorToResponseError)."""
        plog = self.catalog.partition_log(OFFSETS_TOPIC, self.partition_for(group_id))
        try:
            if plog is None:
                raise group_error(ke.UnknownTopicOrPartitionError)
            batch = build_batch(records, self.now_ms(), producer_id=producer_id, producer_epoch=producer_epoch,
                                transactional=transactional)
            if self.owned is None:
                info = plog.append(batch, origin=AppendOrigin.COORDINATOR)
            else:
                partition = self.partition_for(group_id)
                epoch = self.owned.get(partition)
                if epoch is None:
                    raise group_error(ke.NotCoordinatorError)
                if (code := self.append_check(OFFSETS_TOPIC, partition)):
                    raise group_error(ke.for_code(_COORDINATOR_ERRORS.get(code, code)))
                info = plog.append(batch, leader_epoch=epoch, origin=AppendOrigin.COORDINATOR)
                self._append_end[partition] = self._group_end[group_id] = info.last_offset + 1
        except Exception as exc:
            code = exc.errno if isinstance(exc, GroupError) else self.error_code(exc)
            log.warning("group %s: %s append failed: %r", group_id, OFFSETS_TOPIC, exc)
            raise AppendFailed(errors.get(code, code), exc) from exc
        return info.first_offset

    async def durable(self, group_id: str) -> int:
        """0 once this node's last append to the group's partition is replicated (at once on a single
        node), else the error code to answer (NOT_COORDINATOR when leadership moved meanwhile)."""
        if self.replication is None:
            return 0
        p = self.partition_for(group_id)
        end = self._append_end.get(p)
        if end is None:
            return 0
        code = await self.replication(OFFSETS_TOPIC, p, end)
        return 0 if not code else _COORDINATOR_ERRORS.get(code, code)

    async def committed_view(self, group_id: str) -> int:
        """Before a read of the group's stored state (OffsetFetch): 0 once this node's appends for the
        group made before the read are replicated, else the error to answer — a reader never sees a
        commit that a coordinator failover could still lose (Kafka's coordinators read at the last
        committed offset). Only the group's own writes are waited for (other groups sharing the
        partition do not hold its readers up); a few rounds while new ones keep arriving."""
        if self.replication is None:
            return 0
        p = self.partition_for(group_id)
        for _ in range(READ_BARRIER_ROUNDS):
            end = self._group_end.get(group_id)
            if end is None:
                return 0
            if (code := await self.replication(OFFSETS_TOPIC, p, end)):
                return _COORDINATOR_ERRORS.get(code, code)
            if self._group_end.get(group_id) == end:
                del self._group_end[group_id]
                return 0
        return 0

    # ============================================================== timers

    def schedule(self, key: str, delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` after `delay_ms`, replacing any timer of the same key."""
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, fn, args)

    def cancel(self, key: str) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, key: str, fn: Callable[..., None], args: tuple) -> None:
        self._timers.pop(key, None)
        try:
            fn(*args)
        except Exception:
            log.exception("group coordinator timer %s failed", key)

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
