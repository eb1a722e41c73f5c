"""The share coordinator (Kafka's ShareCoordinatorService over its CoordinatorRuntime): one `ShareShard` per
`__share_group_state` partition this node coordinates, their loading, and the appends of their records.

Runs on the event loop thread only. A request is one share-partition key ("groupId:topicId:partition", whose
coordinator partition is Kafka's `Utils.abs(hashCode) % partitions`): its shard computes records and answer,
the records are appended with the ordinary partition-log interface (AppendOrigin.COORDINATOR; on a cluster
with the partition's leader epoch, refused while this node may not append) and replayed into the shard at
once; the answer waits until every append of that partition made so far is replicated (reads too: nobody
sees state a failover could lose). Single node: every partition is coordinated in epoch 0; on a cluster
only those this node leads (`load_partition` / `unload_partition`).
"""
from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from typing import Any, Awaitable, Callable

from minikafka.protocol.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    KAFKA_STORAGE_ERROR,
    MESSAGE_SIZE_TOO_LARGE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_FOR_PARTITION,
    RECORD_LIST_TOO_LARGE,
    REQUEST_TIMED_OUT,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from minikafka.coordinator.group.records import build_batch
from minikafka.coordinator.partitioning import partition_for
from minikafka.coordinator.share.config import SHARE_STATE_TOPIC, ShareCoordinatorConfig
from minikafka.coordinator.share.persister import PartitionState, StateBatch
from minikafka.coordinator.share.records import encode_key, encode_value
from minikafka.coordinator.share.shard import Record, ShareShard
from minikafka.storage.partition_log import AppendOrigin

log = logging.getLogger(__name__)

# a failed append or replication wait -> the error the request gets (Kafka's
# CoordinatorOperationExceptionHelper.handleOperationException)
APPEND_ERRORS = {
    NOT_ENOUGH_REPLICAS: COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: COORDINATOR_NOT_AVAILABLE,
    REQUEST_TIMED_OUT: COORDINATOR_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION: COORDINATOR_NOT_AVAILABLE,
    NOT_LEADER_FOR_PARTITION: NOT_COORDINATOR,
    KAFKA_STORAGE_ERROR: NOT_COORDINATOR,
    MESSAGE_SIZE_TOO_LARGE: UNKNOWN_SERVER_ERROR,
    RECORD_LIST_TOO_LARGE: UNKNOWN_SERVER_ERROR,
}
OPERATIONS = {"initialize": "initialize share group state", "read": "read share group state",
              "write": "write share group state", "delete": "delete share group state",
              "summary": "read share group state summary"}
_MESSAGES = {NOT_COORDINATOR: "This is not the correct coordinator.",
             COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
             COORDINATOR_NOT_AVAILABLE: "The coordinator is not available."}


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def share_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "groupId:topicId:partition"."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def parse_share_key(key: str) -> tuple[str, uuid.UUID, int]:
    """Kafka's SharePartitionKey.getInstance(String); ValueError with its message when malformed."""
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    while tokens and tokens[-1] == "":  # Java's String.split drops trailing empty strings
        tokens.pop()
    if len(tokens) < 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found - {key}")
    group = ":".join(tokens[:-2])
    if not group.strip():
        raise ValueError("GroupId must not be empty")
    try:
        raw = base64.urlsafe_b64decode(tokens[-2] + "==")
        if len(raw) != 16 or len(tokens[-2]) != 22:
            raise ValueError
        topic_id = uuid.UUID(bytes=raw)
    except (ValueError, TypeError):
        raise ValueError(f"Invalid topic ID: {tokens[-2]}") from None
    try:
        partition = int(tokens[-1])
        if not -2**31 <= partition < 2**31 or not tokens[-1].lstrip("+-").isdigit():
            raise ValueError
    except ValueError:
        raise ValueError(f"Invalid partition: {tokens[-1]}") from None
    return group, topic_id, partition


class ShareCoordinator:
    """Share-partition state of every `__share_group_state` partition this node coordinates."""

    def __init__(self, config: ShareCoordinatorConfig, catalog: Any, error_code: Callable[[BaseException], int],
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.catalog = catalog  # broker TopicCatalog: get / create_async / partition_log / by_id
        self.error_code = error_code
        self._clock = clock
        self.shards: dict[int, ShareShard] = {}  # loaded partitions
        self._loading: set[int] = set()
        self._topic_ready = False
        self._append_end: dict[int, int] = {}  # partition -> end offset of this node's last append
        # cluster: partition -> coordinator epoch (leader epoch) of the partitions this node leads; None on a
        # single node (all partitions, epoch 0)
        self.owned: dict[int, int] | None = None
        self.replication: Callable[[str, int, int], Awaitable[int]] | None = None
        self.append_check: Callable[[str, int], int] = lambda _t, _p: 0
        self._load_task: asyncio.Task | None = None
        self._jobs: list[asyncio.Task] = []
        self._pruned: dict[int, int] = {}  # partition -> offset pruned to

    # ================================================================== partitions
    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(share_key(group_id, topic_id, partition), self.config.num_partitions)

    def partition_for_key(self, key: str) -> int:
        return partition_for(key, self.config.num_partitions)

    def _topic_partitions(self, topic_id: uuid.UUID) -> int | None:
        info = self.catalog.by_id.get(topic_id)
        return None if info is None else info.partitions

    def new_shard(self) -> ShareShard:
        return ShareShard(self.config.records_per_snapshot, self._topic_partitions, self.now_ms)

    @property
    def topic_exists(self) -> bool:
        if not self._topic_ready and self.catalog.get(SHARE_STATE_TOPIC) is not None:
            self._topic_ready = True
        return self._topic_ready

    def topic_configs(self) -> dict[str, str]:
        return self.config.topic_configs()

    async def ensure_topic_async(self) -> None:
        """Single node: create `__share_group_state` on first use (partition files made off the event loop);
        new and empty, its partitions are loaded at once."""
        if self.topic_exists:
            return
        if self.owned is not None:  # a cluster: the controller creates it (FindCoordinator, the failover)
            return
        configs = dict(self.topic_configs(), **{"min.insync.replicas": "1"})
        await self.catalog.create_async(SHARE_STATE_TOPIC, self.config.num_partitions, 1, configs,
                                        internal=True, exist_ok=True)
        self._topic_ready = True
        if not self.shards and not self._loading and self._load_task is None:
            for p in range(self.config.num_partitions):
                self.shards[p] = self.new_shard()

    def start_loading(self) -> asyncio.Task | None:
        """Single node: if the topic exists, replay all its partitions in the background (their keys answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
        from minikafka.coordinator.share.loader import load_all
        info = self.catalog.get(SHARE_STATE_TOPIC)
        if info is None or self.owned is not None or self._load_task is not None:
            return None
        if info.partitions != self.config.num_partitions:
            log.info("%s has %d partitions: using the topic's count", SHARE_STATE_TOPIC, info.partitions)
            import dataclasses
            self.config = dataclasses.replace(self.config, num_partitions=info.partitions)
        self._loading.update(range(self.config.num_partitions))
        self._load_task = asyncio.get_running_loop().create_task(load_all(self))
        return self._load_task

    def enable_partition_ownership(self, replication: Callable[[str, int, int], Awaitable[int]],
                                   append_check: Callable[[str, int], int] = lambda _t, _p: 0) -> None:
        """Cluster mode: coordinate only partitions loaded as this node became their leader; appends wait
        for `replication` and are not made while `append_check` answers an error."""
        self.owned = {}
        self.replication = replication
        self.append_check = append_check
        self.shards.clear()
        self._loading.clear()

    async def load_partition(self, partition: int, epoch: int) -> None:
        """This node leads `partition` in `epoch`: replay it, then coordinate its keys."""
        from minikafka.coordinator.share.loader import load_partition
        if self.owned is None:
            return
        current = self.owned.get(partition)
        if current is not None and current >= epoch:
            return
        self.unload_partition(partition)
        self.owned[partition] = epoch
        self._loading.add(partition)
        shard = self.new_shard()
        try:
            plog = self.catalog.partition_log(SHARE_STATE_TOPIC, partition)
            if plog is not None:
                await load_partition(shard, plog, partition)
        except asyncio.CancelledError:
            self._loading.discard(partition)
            raise
        except Exception:
            log.exception("loading %s-%d failed; its share-partitions start empty", SHARE_STATE_TOPIC, partition)
        self._loading.discard(partition)
        if self.owned.get(partition) == epoch:
            self.shards[partition] = shard
            log.info("coordinating %s-%d in epoch %d", SHARE_STATE_TOPIC, partition, epoch)

    def unload_partition(self, partition: int) -> None:
        """No longer the leader of `partition`: its share-partitions are forgotten (NOT_COORDINATOR)."""
        if self.owned is not None:
            self.owned.pop(partition, None)
        self.shards.pop(partition, None)
        self._loading.discard(partition)
        self._append_end.pop(partition, None)
        self._pruned.pop(partition, None)

    def on_loaded(self, partition: int, shard: ShareShard) -> None:
        self._loading.discard(partition)
        self.shards[partition] = shard

    def _shard(self, partition: int) -> ShareShard | int:
        if partition in self._loading:
            return COORDINATOR_LOAD_IN_PROGRESS
        shard = self.shards.get(partition)
        if shard is None:
            return NOT_COORDINATOR
        return shard

    # ================================================================== appends
    def _append(self, partition: int, shard: ShareShard, records: list[Record]) -> int:
        """Append `records` and replay them into `shard`; 0 or the error code to answer."""
        if not records:
            return 0
        plog = self.catalog.partition_log(SHARE_STATE_TOPIC, partition)
        try:
            if plog is None:
                return COORDINATOR_NOT_AVAILABLE
            batch = build_batch([(encode_key(k), None if v is None else encode_value(v)) for k, v in records],
                                self.now_ms())
            if self.owned is None:
                info = plog.append(batch, origin=AppendOrigin.COORDINATOR)
            else:
                epoch = self.owned.get(partition)
                if epoch is None:
                    return NOT_COORDINATOR
                if (code := self.append_check(SHARE_STATE_TOPIC, partition)):
                    return APPEND_ERRORS.get(code, code)
                info = plog.append(batch, leader_epoch=epoch, origin=AppendOrigin.COORDINATOR)
                self._append_end[partition] = info.last_offset + 1
        except Exception as exc:
            code = self.error_code(exc)
            log.warning("%s-%d append failed: %r", SHARE_STATE_TOPIC, partition, exc)
            return APPEND_ERRORS.get(code, code) or UNKNOWN_SERVER_ERROR
        for i, (key, value) in enumerate(records):
            shard.replay(key, value, info.first_offset + i)
        return 0

    async def _durable(self, partition: int) -> int:
        """0 once this node's appends to `partition` are replicated (at once on a single node)."""
        if self.replication is None:
            return 0
        end = self._append_end.get(partition)
        if end is None:
            return 0
        code = await self.replication(SHARE_STATE_TOPIC, partition, end)
        return 0 if not code else APPEND_ERRORS.get(code, code)

    async def _run(self, op: str, group_id: str, topic_id: uuid.UUID, partition: int,
                   fn: Callable[[ShareShard], tuple[list[Record], PartitionState]]) -> PartitionState:
        if self.owned is None:
            if not self.topic_exists:
                await self.ensure_topic_async()
            elif not self.shards and self._load_task is None:
                self.start_loading()
        p = self.partition_for(group_id, topic_id, partition)
        shard = self._shard(p)
        if isinstance(shard, int):
            return self._failed(op, shard)
        records, answer = fn(shard)
        code = self._append(p, shard, records) if not answer.error_code else 0
        if not code:
            code = await self._durable(p)
        return self._failed(op, code) if code else answer

    @staticmethod
    def _failed(op: str, code: int) -> PartitionState:
        return PartitionState(error_code=code,
                              error_message=f"Unable to {OPERATIONS[op]}: {_MESSAGES.get(code, 'error ' + str(code))}")

    # ================================================================== the state RPCs, one key each
    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> PartitionState:
        return await self._run("initialize", group_id, topic_id, partition,
                               lambda s: s.initialize(group_id, topic_id, partition, state_epoch, start_offset))

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> PartitionState:
        return await self._run("read", group_id, topic_id, partition,
                               lambda s: s.read(group_id, topic_id, partition, leader_epoch))

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int, batches: list[StateBatch],
                          delivery_complete_count: int = -1) -> PartitionState:
        return await self._run("write", group_id, topic_id, partition,
                               lambda s: s.write(group_id, topic_id, partition, state_epoch, leader_epoch,
                                                 start_offset, batches, delivery_complete_count))

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> PartitionState:
        return await self._run("delete", group_id, topic_id, partition,
                               lambda s: s.delete(group_id, topic_id, partition))

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int) -> PartitionState:
        return await self._run("summary", group_id, topic_id, partition,
                               lambda s: ([], s.read_summary(group_id, topic_id, partition, leader_epoch)))

    # ================================================================== housekeeping
    def cleanup_topics(self, topic_ids: set[uuid.UUID]) -> None:
        """Topics were deleted: tombstone their share-partitions in every coordinated partition."""
        for p, shard in list(self.shards.items()):
            records = shard.tombstones_for_topics(topic_ids)
            if records and (code := self._append(p, shard, records)):
                log.info("tombstones of deleted topics in %s-%d failed: error %d", SHARE_STATE_TOPIC, p, code)

    def prune(self) -> None:
        """Delete the records of every coordinated partition below its last redundant offset (each live
        share-partition has a snapshot at or after it), never past the high watermark (Kafka's record pruning
        of `__share_group_state`, a delete-policy topic kept forever otherwise). Share-partitions of topics this
        node's metadata no longer has get their tombstones first (Kafka does it as the deletion reaches its
        metadata image), so that they do not hold pruning back."""
        gone = {k[1] for shard in self.shards.values() for k in shard.states} - set(self.catalog.by_id)
        if gone:
            self.cleanup_topics(gone)
        for p, shard in list(self.shards.items()):
            offset = shard.last_redundant_offset()
            plog = self.catalog.partition_log(SHARE_STATE_TOPIC, p)
            if offset is None or plog is None:
                continue
            offset = min(offset, plog.high_watermark)
            if offset > plog.log_start_offset and self._pruned.get(p) != offset:
                if self.owned is not None and self.append_check(SHARE_STATE_TOPIC, p):
                    continue  # not the leader (any more)
                try:
                    plog.delete_records_before(offset)
                    self._pruned[p] = offset
                except Exception as exc:
                    log.info("pruning %s-%d before %d failed: %r", SHARE_STATE_TOPIC, p, offset, exc)

    def snapshot_cold_partitions(self) -> None:
        for p, shard in list(self.shards.items()):
            records = shard.cold_snapshots(self.config.cold_partition_snapshot_interval_ms)
            if records and (code := self._append(p, shard, records)):
                log.info("cold snapshots in %s-%d failed: error %d", SHARE_STATE_TOPIC, p, code)

    def start_jobs(self) -> None:
        """The periodic jobs of Kafka's ShareCoordinatorService: record pruning and cold-partition snapshots."""
        if self._jobs:
            return
        loop = asyncio.get_running_loop()
        self._jobs = [loop.create_task(self._every(self.config.prune_interval_ms, self.prune)),
                      loop.create_task(self._every(self.config.cold_partition_snapshot_interval_ms,
                                                   self.snapshot_cold_partitions))]

    @staticmethod
    async def _every(interval_ms: int, job: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                job()
            except Exception:
                log.exception("share coordinator job %s failed", getattr(job, "__name__", job))

    def close(self) -> None:
        if self._load_task is not None:
            self._load_task.cancel()
        for task in self._jobs:
            task.cancel()
        self._jobs = []
