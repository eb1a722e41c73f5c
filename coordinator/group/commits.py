"""Committed offsets, a part of GroupCoordinator: OffsetCommit, TxnOffsetCommit (staged until the
transaction marker), OffsetFetch, OffsetDelete and offsets retention — Kafka's OffsetMetadataManager."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

import kafka.errors as ke

from minikafka.coordinator.group.errors import (
    APPEND_ERRORS_COMMIT,
    APPEND_ERRORS_GROUP,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    NONE,
    NON_EMPTY_GROUP,
    OFFSET_METADATA_TOO_LARGE,
    UNSTABLE_OFFSET_COMMIT,
    AppendFailed,
)
from minikafka.coordinator.group.metadata import ClassicGroup, GroupError, GroupState, group_error
from minikafka.coordinator.group.offsets import OffsetAndMetadata, OffsetStore
from minikafka.coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_offset_commit_value,
)

if TYPE_CHECKING:
    from minikafka.coordinator.group.coordinator import GroupConfig
    from minikafka.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator
    from minikafka.coordinator.group.membership import GroupMembership
    from minikafka.coordinator.group.runtime import GroupRuntime

log = logging.getLogger(__name__)


class GroupOffsets:
    """The committed offsets of every group (`offsets`, the store), for classic groups (`membership`) and
    consumer groups (`membership.consumer`) alike."""

    streams = None  # the streams groups (KIP-1071), set by GroupCoordinator

    def __init__(self, rt: GroupRuntime, membership: GroupMembership) -> None:
        self.rt = rt
        self.membership = membership
        self.offsets = OffsetStore()

    @property
    def config(self) -> GroupConfig:
        return self.rt.config

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.membership.groups

    @property
    def consumer(self) -> ConsumerGroupCoordinator:
        return self.membership.consumer

    # ============================================================== offsets

    def commit_offsets(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       retention_time_ms: int, api_version: int,
                       partitions: list[tuple[str, int, int, int, str | None]]) -> dict[tuple[str, int], int]:
        """Per (topic, partition) error for (topic, partition, offset, leader epoch, metadata) commits of
        existing partitions (the handler answers unknown ones itself, as KafkaApis does)."""
        def fail(code: int) -> dict[tuple[str, int], int]:
            return {(t, p): code for t, p, *_ in partitions}

        try:
            self.rt.check_partition(group_id, create=True)
        except GroupError as exc:
            return fail(exc.errno)
        except Exception as exc:
            return fail(self.rt.error_code(exc))
        group = self.groups.get(group_id)
        created = False
        per_partition = None  # a streams group's check of commits made with an older member epoch
        try:
            if group_id in self.consumer.groups:  # a KIP-848 group: generation_id is the member epoch
                self.consumer.validate_offset_commit(group_id, member_id, generation_id, api_version)
            elif self.streams is not None and group_id in self.streams.groups:  # KIP-1071: likewise
                per_partition = self.streams.validate_offset_commit(group_id, member_id, generation_id, api_version,
                                                                    instance_id=group_instance_id)
            elif group is None:
                if generation_id >= 0:
                    # v9+ says so; older versions keep the historical ILLEGAL_GENERATION
                    return fail(GROUP_ID_NOT_FOUND if api_version >= 9 else ILLEGAL_GENERATION)
                group, created = ClassicGroup(group_id, GroupState.EMPTY, now_ms=self.rt.now_ms()), True
            else:
                self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        except GroupError as exc:
            return fail(exc.errno)
        if generation_id >= 0 and group is not None and member_id in group.members:
            self.membership.reschedule_heartbeat(group, group.members[member_id])
        now = self.rt.now_ms()
        expire = now + retention_time_ms if retention_time_ms is not None and retention_time_ms >= 0 else -1
        results: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        values: list[tuple[str, int, OffsetAndMetadata]] = []
        max_meta = self.config.offset_metadata_max_bytes
        for topic, partition, offset, leader_epoch, metadata in partitions:
            if metadata is not None and len(metadata) > max_meta:
                results[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
                continue
            if per_partition is not None and (code := per_partition(topic, partition)):
                results[(topic, partition)] = code
                continue
            value = OffsetCommitValue(offset, metadata or "", now, leader_epoch, expire)
            records.append((encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)),
                            encode_offset_commit_value(value)))
            values.append((topic, partition, OffsetAndMetadata(offset, leader_epoch, metadata or "", now, expire)))
            results[(topic, partition)] = NONE
        if records:
            try:
                base = self.rt.append(group_id, records, APPEND_ERRORS_COMMIT)
            except AppendFailed as exc:
                return {tp: (exc.errno if code == NONE else code) for tp, code in results.items()}
            if created:
                self.groups[group_id] = group
            for i, (topic, partition, value) in enumerate(values):
                self.offsets.put(group_id, topic, partition, _with_record_offset(value, base + i))
        return results

    def commit_transactional_offsets(self, *, group_id: str, producer_id: int, producer_epoch: int,
                                     generation_id: int, member_id: str, group_instance_id: str | None,
                                     partitions: list[tuple[str, int, int, int, str | None]]
                                     ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: offsets written in a transactional batch of the producer and staged until its
        COMMIT/ABORT marker reaches the group's partition (`replay_marker`). Same arguments and result
        as commit_offsets; the transaction coordinator has already checked the producer."""
        def fail(code: int) -> dict[tuple[str, int], int]:
            return {(t, p): code for t, p, *_ in partitions}

        try:
            self.rt.check_partition(group_id, create=True)
        except GroupError as exc:
            return fail(exc.errno)
        except Exception as exc:
            return fail(self.rt.error_code(exc))
        group = self.groups.get(group_id)
        created = False
        per_partition = None  # a streams group's check of commits made with an older member epoch
        try:
            if group_id in self.consumer.groups:  # a KIP-848 group: generation_id is the member epoch
                self.consumer.validate_offset_commit(group_id, member_id, generation_id, None, transactional=True)
            elif self.streams is not None and group_id in self.streams.groups:
                # KIP-1071; TxnOffsetCommit has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION
                try:
                    check = self.streams.validate_offset_commit(group_id, member_id, generation_id, None,
                                                                transactional=True, instance_id=group_instance_id)
                except GroupError as exc:
                    if exc.errno == ke.StaleMemberEpochError.errno:
                        raise group_error(ke.IllegalGenerationError) from None
                    raise
                per_partition = check
            elif group is None:
                if generation_id >= 0:
                    return fail(ILLEGAL_GENERATION)
                group, created = ClassicGroup(group_id, GroupState.EMPTY, now_ms=self.rt.now_ms()), True
            else:
                self._validate_offset_commit(group, member_id, group_instance_id, generation_id, transactional=True)
        except GroupError as exc:
            return fail(exc.errno)
        now = self.rt.now_ms()
        results: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        values: list[tuple[str, int, OffsetAndMetadata]] = []
        for topic, partition, offset, leader_epoch, metadata in partitions:
            if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
                continue
            if per_partition is not None and per_partition(topic, partition):
                results[(topic, partition)] = ILLEGAL_GENERATION
                continue
            records.append((encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)),
                            encode_offset_commit_value(OffsetCommitValue(offset, metadata or "", now, leader_epoch))))
            values.append((topic, partition, OffsetAndMetadata(offset, leader_epoch, metadata or "", now)))
            results[(topic, partition)] = NONE
        if records:
            try:
                base = self.rt.append(group_id, records, APPEND_ERRORS_COMMIT, producer_id=producer_id,
                                    producer_epoch=producer_epoch, transactional=True)
            except AppendFailed as exc:
                return {tp: (exc.errno if code == NONE else code) for tp, code in results.items()}
            if created:
                self.groups[group_id] = group
            for i, (topic, partition, value) in enumerate(values):
                self.offsets.stage_transactional(producer_id, group_id, topic, partition,
                                                 _with_record_offset(value, base + i))
        return results

    def _validate_offset_commit(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                                generation_id: int, transactional: bool = False) -> None:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if group.is_in(GroupState.DEAD):
            raise group_error(ke.CoordinatorNotAvailableError)
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return  # admin client or a consumer without group management
        if generation_id >= 0 or member_id or instance_id is not None:
            group.validate_member(member_id, instance_id)
            if generation_id != group.generation_id:
                raise group_error(ke.IllegalGenerationError)
        elif not transactional and not group.is_in(GroupState.EMPTY):
            raise group_error(ke.UnknownMemberIdError)
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            raise group_error(ke.RebalanceInProgressError)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str, int]]]]]:
        """(group error, [(topic, [(partition, offset, leader epoch, metadata, error)])]); topics None = all.
        `member_id` / `member_epoch` (OffsetFetch v9+) are checked against a KIP-848 group's member."""
        if self.rt.topic_exists:
            try:
                self.rt.check_partition(group_id)
                if group_id in self.consumer.groups:
                    self.consumer.validate_offset_fetch(group_id, member_id, member_epoch)
                elif self.streams is not None and group_id in self.streams.groups:
                    self.streams.validate_offset_fetch(group_id, member_id, member_epoch)
            except GroupError as exc:
                return exc.errno, []
        group = self.groups.get(group_id)
        known = (group is not None and not group.is_in(GroupState.DEAD)) or group_id in self.consumer.groups \
            or (self.streams is not None and group_id in self.streams.groups)
        out: list[tuple[str, list[tuple[int, int, int, str, int]]]] = []
        if topics is None:
            if not known:
                return NONE, []
            for topic, parts in self.offsets.group_offsets(group_id).items():
                rows = []
                for partition, value in sorted(parts.items()):
                    rows.append(self._fetch_row(group_id, topic, partition, value, require_stable))
                out.append((topic, rows))
            return NONE, out
        for topic, partitions in topics:
            rows = []
            for partition in partitions:
                value = self.offsets.get(group_id, topic, partition) if known else None
                rows.append(self._fetch_row(group_id, topic, partition, value, require_stable))
            out.append((topic, rows))
        return NONE, out

    def _fetch_row(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None,
                   require_stable: bool) -> tuple[int, int, int, str, int]:
        if require_stable and self.offsets.has_pending(group_id, topic, partition):
            return partition, -1, -1, "", UNSTABLE_OFFSET_COMMIT
        if value is None:
            return partition, -1, -1, "", NONE
        return partition, value.offset, value.leader_epoch, value.metadata, NONE

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete for existing partitions: (group error, per-partition errors)."""
        if not self.rt.topic_exists:
            return GROUP_ID_NOT_FOUND, {}
        try:
            self.rt.check_partition(group_id)
        except GroupError as exc:
            return exc.errno, {}
        group = self.groups.get(group_id)
        consumer_group = self.consumer.groups.get(group_id)
        streams_group = self.streams.groups.get(group_id) if self.streams is not None else None
        if consumer_group is not None:  # KIP-848: offsets of topics no member subscribes to may go
            is_subscribed_to = consumer_group.subscribed_topic_names().__contains__
        elif streams_group is not None:  # KIP-1071: offsets of the topology's source topics stay while it has members
            is_subscribed_to = streams_group.is_subscribed_to
        elif group is None or group.is_in(GroupState.DEAD):
            return GROUP_ID_NOT_FOUND, {}
        elif (group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
                and not group.uses_consumer_protocol()):
            return NON_EMPTY_GROUP, {}
        else:
            is_subscribed_to = group.is_subscribed_to
        results: dict[tuple[str, int], int] = {}
        doomed: list[tuple[str, int]] = []
        for topic, partition in partitions:
            if is_subscribed_to(topic):
                results[(topic, partition)] = GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[(topic, partition)] = NONE
            if self.offsets.get(group_id, topic, partition) is not None:
                doomed.append((topic, partition))
        if doomed:
            try:
                self.rt.append(group_id, [(encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None)
                                        for t, p in doomed], APPEND_ERRORS_GROUP)
            except AppendFailed as exc:
                return exc.errno, {}
            for t, p in doomed:
                self.offsets.delete(group_id, t, p)
        return NONE, results

    # ============================================================== retention

    def expire_offsets(self) -> int:
        """Kafka's offset retention pass: tombstones for expired offsets; empty groups whose offsets
        all expired are deleted. Returns the number of offsets removed."""
        now = self.rt.now_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group_id in sorted(set(self.groups) | set(self.consumer.groups) | set(self.offsets.groups())):
            if self.rt.is_loading(self.rt.partition_for(group_id)):
                continue
            group = self.groups.get(group_id)
            consumer_group = self.consumer.groups.get(group_id)
            streams_group = self.streams.groups.get(group_id) if self.streams is not None else None
            if consumer_group is not None or streams_group is not None:
                # KIP-848 and KIP-1071 groups: measured from the commit, kept while a member subscribes to the topic
                modern = consumer_group if consumer_group is not None else streams_group
                subscribed = consumer_group.subscribed_topic_names().__contains__ if consumer_group is not None \
                    else streams_group.is_subscribed_to
                expired, all_expired = self.offsets.expired(group_id, now, retention, lambda v: v.commit_timestamp,
                                                            subscribed)
                delete_group = all_expired and not modern.members
                records: list[tuple[bytes, bytes | None]] = [
                    (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None) for t, p in expired]
                if delete_group:
                    records += (self.consumer if consumer_group is not None else self.streams).tombstones(modern)
            else:
                if group is None:
                    continue
                base = self._expiration_base(group)
                if base is None:
                    continue
                expired, all_expired = self.offsets.expired(group_id, now, retention, base, group.is_subscribed_to)
                records = [(encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None) for t, p in expired]
                delete_group = all_expired and group.is_in(GroupState.EMPTY)
                if delete_group:
                    records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
            if not records:
                continue
            try:
                self.rt.append(group_id, records, APPEND_ERRORS_GROUP)
            except AppendFailed:
                continue
            for t, p in expired:
                self.offsets.delete(group_id, t, p)
            removed += len(expired)
            if expired:
                log.info("group %s: removed %d expired offsets", group_id, len(expired))
            if delete_group:
                log.info("group %s: empty with no offsets left, deleted", group_id)
                if consumer_group is not None:
                    self.consumer.forget(group_id)
                elif streams_group is not None:
                    self.streams.forget(group_id)
                else:
                    self.membership.remove_group(group)
        return removed

    @staticmethod
    def _expiration_base(group: ClassicGroup) -> Callable[[OffsetAndMetadata], int] | None:
        """Kafka's ClassicGroup.offsetExpirationCondition: what an offset's age is measured from."""
        if group.protocol_type:
            if group.is_in(GroupState.EMPTY):
                ts = group.state_timestamp
                return (lambda v: ts) if ts is not None and ts >= 0 else (lambda v: v.commit_timestamp)
            if (group.uses_consumer_protocol() and group.subscribed_topics is not None
                    and group.is_in(GroupState.STABLE)):
                return lambda v: v.commit_timestamp
            return None
        return lambda v: v.commit_timestamp


    # ============================================================== replay and resignation

    def replay_offset_commit(self, key: OffsetCommitKey, value: OffsetCommitValue | None, record_offset: int,
                             producer_id: int = -1, transactional: bool = False) -> None:
        if value is None:
            self.offsets.delete(key.group, key.topic, key.partition)
            return
        oam = OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                value.expire_timestamp, record_offset)
        if key.group not in self.groups and key.group not in self.consumer.groups and not (
                self.streams is not None and key.group in self.streams.groups):
            # offsets without group membership: a "simple" group, Empty with no protocol type
            self.groups[key.group] = ClassicGroup(key.group, GroupState.EMPTY, now_ms=self.rt.now_ms())
        if transactional and producer_id >= 0:
            self.offsets.stage_transactional(producer_id, key.group, key.topic, key.partition, oam)
        else:
            self.offsets.put(key.group, key.topic, key.partition, oam)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        self.offsets.complete_transaction(producer_id, commit)

    def forget_partition(self, partition: int) -> None:
        """Drop the offsets, committed and pending, of the groups of `partition`."""
        for group_id in [g for g in self.offsets.groups() if self.rt.partition_for(g) == partition]:
            self.offsets.delete_group(group_id)
        for group_id in [g for g in self.offsets.open_transaction_groups() if self.rt.partition_for(g) == partition]:
            self.offsets.drop_pending_for_group(group_id)


def _with_record_offset(value: OffsetAndMetadata, record_offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                             value.expire_timestamp, record_offset)
