"""The group coordinator (Kafka's GroupCoordinatorService / GroupCoordinatorShard, for
`__consumer_offsets`), composed of its parts:

- `GroupRuntime` (runtime.py): partitions, loading state, appends and their replication, timers;
- `GroupMembership` (membership.py): the classic groups, JoinGroup/SyncGroup/Heartbeat/LeaveGroup;
- `ConsumerGroupCoordinator` (consumer/): the KIP-848 groups, ConsumerGroupHeartbeat/Describe;
- `GroupOffsets` (commits.py): OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, retention;
- `GroupAdmin` (admin.py): ListGroups, DescribeGroups, DeleteGroups.

This class wires them and is what the broker calls: each request goes to the part that serves it, and the
replay of a loaded partition (loader.py) to the part that owns the record. Runs on the event loop thread
only. Every state change that Kafka persists is written before it is acknowledged, and replayed on start.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from minikafka.coordinator.group.admin import GroupAdmin
from minikafka.coordinator.group.commits import GroupOffsets
from minikafka.coordinator.group.consumer.config import ConsumerGroupSettings
from minikafka.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator
from minikafka.coordinator.group.errors import OFFSETS_TOPIC
from minikafka.coordinator.group.membership import GroupMembership
from minikafka.coordinator.group.metadata import ClassicGroup
from minikafka.coordinator.group.offsets import OffsetStore
from minikafka.coordinator.group.runtime import GroupRuntime
from minikafka.coordinator.group.streams.config import StreamsGroupSettings
from minikafka.coordinator.group.streams.coordinator import StreamsGroupCoordinator
from minikafka.coordinator.group.share.coordinator import ShareGroupCoordinator

log = logging.getLogger(__name__)

__all__ = ["OFFSETS_TOPIC", "GroupConfig", "GroupCoordinator"]

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's classic new-member join timeout


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
    streams: StreamsGroupSettings = StreamsGroupSettings()  # KIP-1071 groups
    share_max_size: int = 200  # group.share.max.size

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
            streams=StreamsGroupSettings.from_props(get),
            share_max_size=int(get("group.share.max.size") or 200),
        )


class GroupCoordinator:
    """Every group of this broker (on a single node it coordinates every partition of __consumer_offsets)."""

    def __init__(self, config: GroupConfig, catalog: Any, error_code: Callable[[BaseException], int],
                 clock: Callable[[], float] = time.time, group_configs: Any = None) -> None:
        self.runtime = GroupRuntime(config, catalog, error_code, clock)
        self.membership = GroupMembership(self.runtime)
        # KIP-848 groups, same partitions; group_configs: per-group overrides (broker/config/group_configs.py)
        self.consumer = ConsumerGroupCoordinator(self.runtime, self.membership, config.consumer, group_configs)
        self.membership.consumer = self.consumer
        # share groups (KIP-932): a group id belongs to one kind of group
        self.share = ShareGroupCoordinator(
            self.runtime, lambda gid: gid in self.membership.groups or gid in self.consumer.groups
            or gid in self.streams.groups, group_configs, max_size=config.share_max_size)
        self.membership.share = self.consumer.share = self.share
        # KIP-1071 streams groups; a group id is in one protocol only
        self.streams = StreamsGroupCoordinator(self.runtime, config.streams, group_configs, self._group_type)
        self.membership.streams = self.consumer.streams = self.streams
        self.streams.classic = self.membership
        self.commits = GroupOffsets(self.runtime, self.membership)
        self.admin = GroupAdmin(self.runtime, self.membership, self.commits.offsets)
        self.admin.share = self.share
        self.admin.streams = self.commits.streams = self.streams
        rt, m, c, a = self.runtime, self.membership, self.commits, self.admin
        # the requests, each served by its part
        self.join_group, self.sync_group, self.heartbeat, self.leave_group = \
            m.join_group, m.sync_group, m.heartbeat, m.leave_group
        self.commit_offsets, self.commit_transactional_offsets = c.commit_offsets, c.commit_transactional_offsets
        self.fetch_offsets, self.delete_offsets, self.expire_offsets = c.fetch_offsets, c.delete_offsets, c.expire_offsets
        self.list_groups, self.describe_group, self.delete_groups = a.list_groups, a.describe_group, a.delete_groups
        # partitions and replication
        self.partition_for, self.coordinator_epoch, self.is_loading = rt.partition_for, rt.coordinator_epoch, rt.is_loading
        self.ensure_topic, self.ensure_topic_async = rt.ensure_topic, rt.ensure_topic_async
        self.mark_loading, self.mark_loaded = rt.mark_loading, rt.mark_loaded
        self.enable_partition_ownership = rt.enable_partition_ownership
        self.durable, self.committed_view, self.close = rt.durable, rt.committed_view, rt.close
        # replay of loaded records (loader.py), to the part that owns each
        self.replay_group_metadata = m.replay_group_metadata
        self.replay_offset_commit, self.replay_marker = c.replay_offset_commit, c.replay_marker
        self.replay_share = self.share.replay

    def _group_type(self, group_id: str) -> str | None:
        """The protocol of a group that is not a streams group ("empty-classic": a classic group Kafka
        replaces), else None."""
        if group_id in self.consumer.groups:
            return "consumer"
        classic = self.membership.groups.get(group_id)
        if classic is not None:
            return "classic" if classic.members or classic.pending_join_members else "empty-classic"
        share = getattr(self, "share", None)
        return "share" if share is not None and group_id in share.groups else None

    @property
    def config(self) -> GroupConfig:
        return self.runtime.config

    @config.setter
    def config(self, config: GroupConfig) -> None:
        """Every part reads the runtime's config (the loader narrows num_partitions to the topic's)."""
        self.runtime.config = config

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """The classic groups (the consumer protocol's are `consumer.groups`)."""
        return self.membership.groups

    @property
    def offsets(self) -> OffsetStore:
        return self.commits.offsets

    @property
    def owned(self) -> dict[int, int] | None:
        return self.runtime.owned

    @property
    def replication(self) -> Callable[[str, int, int], Awaitable[int]] | None:
        return self.runtime.replication

    @property
    def topic_exists(self) -> bool:
        return self.runtime.topic_exists

    def topic_configs(self) -> dict[str, str]:
        return self.runtime.topic_configs()

    async def load_partition(self, partition: int, epoch: int) -> None:
        """This node became the leader of `partition` in leader epoch `epoch`: replay it (requests for its
        groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and coordinate its groups."""
        from minikafka.coordinator.group.loader import load_partition
        owned = self.runtime.owned
        if owned is None:
            return
        current = owned.get(partition)
        if current is not None and current >= epoch:
            return  # already loaded (or loading) in this epoch
        if current is not None:
            self.unload_partition(partition)
        owned[partition] = epoch
        self.runtime.mark_loading([partition])
        plog = self.runtime.catalog.partition_log(OFFSETS_TOPIC, partition)
        try:
            if plog is None:
                self.on_partition_loaded(partition)
            else:
                await load_partition(self, plog, partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed; its groups start empty", OFFSETS_TOPIC, partition)
            self.runtime.mark_loaded(partition)
        if owned.get(partition) != epoch:  # resigned while loading
            self._forget_partition(partition)
        else:
            log.info("coordinating %s-%d in epoch %d", OFFSETS_TOPIC, partition, epoch)

    def unload_partition(self, partition: int) -> None:
        """This node is no longer the leader of `partition`: its groups are forgotten (waiting joins and
        syncs are answered NOT_COORDINATOR, so their members find the new coordinator)."""
        owned = self.runtime.owned
        if owned is None:
            return
        was = owned.pop(partition, None)
        self._forget_partition(partition)
        if was is not None:
            log.info("resigned as coordinator of %s-%d (epoch %d)", OFFSETS_TOPIC, partition, was)

    def _forget_partition(self, partition: int) -> None:
        self.runtime.forget_partition(partition)
        self.membership.forget_partition(partition)
        for group_id in [g for g in self.consumer.groups if self.runtime.partition_for(g) == partition]:
            self.consumer.forget(group_id)
        for group_id in [g for g in self.streams.groups if self.runtime.partition_for(g) == partition]:
            self.streams.forget(group_id)
        for group_id in [g for g in self.share.groups if self.runtime.partition_for(g) == partition]:
            self.share.forget(group_id)
        self.commits.forget_partition(partition)

    def on_partition_loaded(self, partition: int) -> None:
        """After replay: each part starts what runs on its loaded groups; then the partition serves."""
        self.membership.on_partition_loaded(partition)
        self.consumer.on_partition_loaded(partition)
        self.streams.on_partition_loaded(partition)
        self.share.on_partition_loaded(partition)
        self.runtime.mark_loaded(partition)
