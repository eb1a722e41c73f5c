"""The classic group coordinator: membership (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, in
group_membership.py), offsets (OffsetCommit/TxnOffsetCommit/OffsetFetch/OffsetDelete and retention, in
group_commits.py) and administration (ListGroups/DescribeGroups/DeleteGroups, in group_admin.py), with
its state persisted as records in `__consumer_offsets`. This module holds what they share: config,
partition ownership and loading state, record writes, timers, and the replay of loaded records.

Runs on the event loop thread only: handlers call in, timers (asyncio `call_later`) call back, and
records are appended synchronously through the ordinary partition-log interface with
AppendOrigin.COORDINATOR. Join and sync barriers are futures the handlers await. The behaviour
follows Kafka's GroupMetadataManager / OffsetMetadataManager (classic protocol): every state change
that Kafka persists is written before it is acknowledged, and replayed by `group_loader` on start.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

import kafka.errors as ke

from minikafka.storage.partition_log import AppendOrigin
from minikafka.coordinator.group.consumer.config import ConsumerGroupSettings
from minikafka.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator
from minikafka.coordinator.group.admin import GroupAdmin
from minikafka.coordinator.group.commits import GroupOffsets
from minikafka.coordinator.group.errors import APPEND_ERRORS_GROUP, OFFSETS_TOPIC, AppendFailed
from minikafka.coordinator.group.membership import GroupMembership
from minikafka.coordinator.group.metadata import ClassicGroup, GroupError, GroupState, Member, group_error
from minikafka.coordinator.group.offsets import OffsetAndMetadata, OffsetStore
from minikafka.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    build_batch,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from minikafka.coordinator.partitioning import partition_for

log = logging.getLogger(__name__)

__all__ = ["OFFSETS_TOPIC", "GroupConfig", "GroupCoordinator"]

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# replication errors of a coordinator append -> what Kafka's coordinator answers (it lost leadership,
# or the write did not reach enough replicas in time)
READ_BARRIER_ROUNDS = 3  # committed_view: replication waits before a read goes ahead regardless
_COORDINATOR_ERRORS = {
    ke.NotLeaderForPartitionError.errno: ke.NotCoordinatorError.errno,
    ke.NotEnoughReplicasError.errno: ke.CoordinatorNotAvailableError.errno,
    ke.NotEnoughReplicasAfterAppendError.errno: ke.CoordinatorNotAvailableError.errno,
    ke.RequestTimedOutError.errno: ke.CoordinatorNotAvailableError.errno,
    ke.UnknownTopicOrPartitionError.errno: ke.CoordinatorNotAvailableError.errno,
}  # Kafka's classic new-member join timeout


@dataclass(frozen=True)
class GroupConfig:
    """Broker settings of the group coordinator (Kafka key names in `from_props`)."""
    num_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_segment_bytes: int = 104857600
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    consumer: ConsumerGroupSettings = ConsumerGroupSettings()  # KIP-848 groups

    @classmethod
    def from_props(cls, get: Callable[[str], str]) -> "GroupConfig":
        return cls(
            num_partitions=int(get("offsets.topic.num.partitions")),
            min_session_timeout_ms=int(get("group.min.session.timeout.ms")),
            max_session_timeout_ms=int(get("group.max.session.timeout.ms")),
            max_size=int(get("group.max.size")),
            initial_rebalance_delay_ms=int(get("group.initial.rebalance.delay.ms")),
            offsets_retention_ms=int(get("offsets.retention.minutes")) * 60000,
            offsets_retention_check_interval_ms=int(get("offsets.retention.check.interval.ms")),
            offset_metadata_max_bytes=int(get("offset.metadata.max.bytes")),
            offsets_topic_segment_bytes=int(get("offsets.topic.segment.bytes")),
            consumer=ConsumerGroupSettings.from_props(get),
        )


class GroupCoordinator(GroupMembership, GroupOffsets, GroupAdmin):
    """All classic groups of this broker (it coordinates every partition of __consumer_offsets)."""

    def __init__(self, config: GroupConfig, catalog: Any, error_code: Callable[[BaseException], int],
                 clock: Callable[[], float] = time.time, group_configs: Any = None) -> None:
        self.config = config
        self._catalog = catalog  # broker TopicCatalog: get / create / partition_log
        self._error_code = error_code  # broker's exception -> Kafka error code mapping
        self._clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
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
        self._append_check: Callable[[str, int], int] = lambda _t, _p: 0
        # KIP-848 groups, same partitions; group_configs: per-group overrides (broker/config/group_configs.py)
        self.consumer = ConsumerGroupCoordinator(self, config.consumer, group_configs)
    # ============================================================== partitions, topic, records

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    @property
    def topic_exists(self) -> bool:
        if not self._topic_ready and self._catalog.get(OFFSETS_TOPIC) is not None:
            self._topic_ready = True
        return self._topic_ready

    def _topic_configs(self) -> dict[str, str]:
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
        self._catalog.create(OFFSETS_TOPIC, self.config.num_partitions, 1, self._topic_configs(), internal=True)
        self._topic_ready = True
        if self.owned is None:  # on a cluster partitions are loaded as this node becomes their leader
            self._loaded.update(range(self.config.num_partitions))  # new and empty: nothing to load

    async def ensure_topic_async(self) -> None:
        """`ensure_topic` with the partition files made off the event loop; concurrent callers share
        one creation."""
        if self.topic_exists:
            return
        await self._catalog.create_async(OFFSETS_TOPIC, self.config.num_partitions, 1, self._topic_configs(),
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

    def _check_partition(self, group_id: str, create: bool = False) -> int:
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
        """Cluster mode: own no partition until `load_partition` is called for it (this node became the
        leader of that `__consumer_offsets` partition); appends wait for `replication` before answers,
        and are not made while `append_check(topic, partition)` answers an error (Kafka's acks=all
        checks before an append: leadership, min.insync.replicas)."""
        self.owned = {}
        self.replication = replication
        self._append_check = append_check
        self._loaded.clear()

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

    async def load_partition(self, partition: int, epoch: int) -> None:
        """This node became the leader of `partition` in leader epoch `epoch`: replay it (requests for its
        groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and coordinate its groups."""
        from minikafka.coordinator.group.loader import load_partition
        if self.owned is None:
            return
        current = self.owned.get(partition)
        if current is not None and current >= epoch:
            return  # already loaded (or loading) in this epoch
        if current is not None:
            self.unload_partition(partition)
        self.owned[partition] = epoch
        self.mark_loading([partition])
        plog = self._catalog.partition_log(OFFSETS_TOPIC, partition)
        try:
            if plog is None:
                self.on_partition_loaded(partition)
            else:
                await load_partition(self, plog, partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed; its groups start empty", OFFSETS_TOPIC, partition)
            self.mark_loaded(partition)
        if self.owned.get(partition) != epoch:  # resigned while loading
            self._forget_partition(partition)
        else:
            log.info("coordinating %s-%d in epoch %d", OFFSETS_TOPIC, partition, epoch)

    def unload_partition(self, partition: int) -> None:
        """This node is no longer the leader of `partition`: its groups are forgotten (waiting joins and
        syncs are answered NOT_COORDINATOR, so their members find the new coordinator)."""
        if self.owned is None:
            return
        was = self.owned.pop(partition, None)
        self._forget_partition(partition)
        if was is not None:
            log.info("resigned as coordinator of %s-%d (epoch %d)", OFFSETS_TOPIC, partition, was)

    def _forget_partition(self, partition: int) -> None:
        self._loading.discard(partition)
        self._loaded.discard(partition)
        self._append_end.pop(partition, None)
        for group_id in [g for g in self._group_end if self.partition_for(g) == partition]:
            del self._group_end[group_id]
        from minikafka.coordinator.group.metadata import JoinResult, SyncResult
        not_coordinator = ke.NotCoordinatorError.errno
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            self._cancel_group_timers(group)
            for member in list(group.members.values()):
                for fut, result in ((member.awaiting_join, JoinResult(error=not_coordinator, member_id=member.member_id)),
                                    (member.awaiting_sync, SyncResult(error=not_coordinator))):
                    if fut is not None and not fut.done():
                        fut.set_result(result)
        for group_id in [g for g in self.consumer.groups if self.partition_for(g) == partition]:
            self.consumer.forget(group_id)
        for group_id in [g for g in self.offsets.groups() if self.partition_for(g) == partition]:
            self.offsets.delete_group(group_id)
        for group_id in [g for g in list(self.offsets._open_txns) if self.partition_for(g) == partition]:
            self.offsets.drop_pending_for_group(group_id)

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], errors: dict[int, int], *,
                producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append records for `group_id`'s partition; returns the first offset or raises AppendFailed."""
        plog = self._catalog.partition_log(OFFSETS_TOPIC, self.partition_for(group_id))
        try:
            if plog is None:
                raise group_error(ke.UnknownTopicOrPartitionError)
            batch = build_batch(records, self._now_ms(), producer_id=producer_id, producer_epoch=producer_epoch,
                                transactional=transactional)
            if self.owned is None:
                info = plog.append(batch, origin=AppendOrigin.COORDINATOR)
            else:
                partition = self.partition_for(group_id)
                epoch = self.owned.get(partition)
                if epoch is None:
                    raise group_error(ke.NotCoordinatorError)
                if (code := self._append_check(OFFSETS_TOPIC, partition)):
                    raise group_error(ke.for_code(_COORDINATOR_ERRORS.get(code, code)))
                info = plog.append(batch, leader_epoch=epoch, origin=AppendOrigin.COORDINATOR)
                self._append_end[partition] = self._group_end[group_id] = info.last_offset + 1
        except Exception as exc:
            code = exc.errno if isinstance(exc, GroupError) else self._error_code(exc)
            log.warning("group %s: %s append failed: %r", group_id, OFFSETS_TOPIC, exc)
            raise AppendFailed(errors.get(code, code), exc) from exc
        return info.first_offset

    def _group_record(self, group: ClassicGroup, assignment: dict[str, bytes] | None = None,
                      empty: bool = False) -> tuple[bytes, bytes]:
        members = []
        if not empty:
            for m in group.members.values():
                members.append(MemberMetadata(
                    m.member_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                    m.metadata(group.protocol_name),
                    (assignment.get(m.member_id, b"") if assignment is not None else m.assignment),
                    m.group_instance_id))
        value = GroupMetadataValue(
            protocol_type="" if empty else (group.protocol_type or ""),
            generation=0 if empty else group.generation_id,
            protocol=None if empty else group.protocol_name,
            leader=None if empty else group.leader_id,
            current_state_timestamp=group.state_timestamp if group.state_timestamp is not None else -1,
            members=members)
        return (encode_group_metadata_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value))

    def _store_group(self, group: ClassicGroup, assignment: dict[str, bytes] | None = None,
                     empty: bool = False) -> None:
        self._append(group.group_id, [self._group_record(group, assignment, empty)], APPEND_ERRORS_GROUP)

    # ============================================================== timers

    def _schedule(self, key: str, delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        self._cancel(key)
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, fn, args)

    def _cancel(self, key: str) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, key: str, fn: Callable[..., None], args: tuple) -> None:
        self._timers.pop(key, None)
        try:
            fn(*args)
        except Exception:
            log.exception("group coordinator timer %s failed", key)

    @staticmethod
    def _hb_key(group_id: str, member_id: str) -> str:
        return f"heartbeat-{group_id}-{member_id}"

    @staticmethod
    def _join_key(group_id: str) -> str:
        return f"join-{group_id}"

    @staticmethod
    def _sync_key(group_id: str) -> str:
        return f"sync-{group_id}"

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    # ============================================================== loading (replay)

    def replay_offset_commit(self, key: OffsetCommitKey, value: OffsetCommitValue | None, record_offset: int,
                             producer_id: int = -1, transactional: bool = False) -> None:
        if value is None:
            self.offsets.delete(key.group, key.topic, key.partition)
            return
        oam = OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                value.expire_timestamp, record_offset)
        if key.group not in self.groups and key.group not in self.consumer.groups:
            # offsets without group membership: a "simple" group, Empty with no protocol type
            self.groups[key.group] = ClassicGroup(key.group, GroupState.EMPTY, now_ms=self._now_ms())
        if transactional and producer_id >= 0:
            self.offsets.stage_transactional(producer_id, key.group, key.topic, key.partition, oam)
        else:
            self.offsets.put(key.group, key.topic, key.partition, oam)

    def replay_group_metadata(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        old = self.groups.pop(key.group, None)
        if old is not None:
            self._cancel_group_timers(old)
        if value is None:
            return
        group = ClassicGroup(key.group, GroupState.STABLE if value.members else GroupState.EMPTY,
                             now_ms=self._now_ms(), generation_id=value.generation,
                             protocol_type=value.protocol_type or None, protocol_name=value.protocol,
                             leader_id=value.leader,
                             state_timestamp=value.current_state_timestamp if value.current_state_timestamp >= 0
                             else None)
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout,
                            m.session_timeout, value.protocol_type, protocols, m.assignment)
            group.add(member)
        self.groups[key.group] = group

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        self.offsets.complete_transaction(producer_id, commit)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        self._cancel(self._join_key(group.group_id))
        self._cancel(self._sync_key(group.group_id))
        for mid in list(group.members) + list(group.pending_join_members):
            self._cancel(self._hb_key(group.group_id, mid))

    def on_partition_loaded(self, partition: int) -> None:
        """After replay: start session timers of loaded members, enforce group.max.size."""
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            group.subscribed_topics = group.compute_subscribed_topics()
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
            if len(group.members) > self.config.max_size and group.can_rebalance():
                self._prepare_rebalance(group, f"loaded group has more members than group.max.size")
        self.consumer.on_partition_loaded(partition)
        self.mark_loaded(partition)
