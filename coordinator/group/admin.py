"""Group administration, a part of GroupCoordinator: ListGroups, DescribeGroups, DeleteGroups."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import kafka.errors as ke

from minikafka.coordinator.group.errors import (
    APPEND_ERRORS_GROUP,
    COORDINATOR_LOAD_IN_PROGRESS,
    NONE,
    AppendFailed,
)
from minikafka.coordinator.group.metadata import ClassicGroup, GroupError, GroupState, group_error
from minikafka.coordinator.group.records import GroupMetadataKey, OffsetCommitKey, encode_group_metadata_key, encode_offset_commit_key

if TYPE_CHECKING:
    from minikafka.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator
    from minikafka.coordinator.group.membership import GroupMembership
    from minikafka.coordinator.group.offsets import OffsetStore
    from minikafka.coordinator.group.runtime import GroupRuntime
    from minikafka.coordinator.group.share.coordinator import ShareGroupCoordinator

log = logging.getLogger(__name__)


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: list[MemberDescription]


# KafkaApis/GroupMetadataManager: how a failed append of coordinator records is reported
class GroupAdmin:
    """Listing, describing and deleting groups of both protocols, with their offsets."""

    streams = None  # the streams groups (KIP-1071), set by GroupCoordinator

    def __init__(self, rt: GroupRuntime, membership: GroupMembership, offsets: OffsetStore) -> None:
        self.share: ShareGroupCoordinator = None  # type: ignore[assignment]  # wired by GroupCoordinator
        self.rt = rt
        self.membership = membership
        self.offsets = offsets

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.membership.groups

    @property
    def consumer(self) -> ConsumerGroupCoordinator:
        return self.membership.consumer

    # ============================================================== administration

    def list_groups(self, states: set[str], types: set[str]) -> tuple[int, list[ClassicGroup]]:
        states = {s.lower() for s in states}
        types = {t.lower() for t in types}
        out = []
        for group in self.groups.values():
            if self.rt.is_loading(self.rt.partition_for(group.group_id)) or group.is_in(GroupState.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append(group)
        out += self.consumer.list_groups(states, types)
        out += self.share.list_groups(states, types)
        if self.streams is not None:
            out += self.streams.list_groups(states, types)
        return (COORDINATOR_LOAD_IN_PROGRESS if self.rt.any_loading() else NONE), out

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """None if the group does not exist; raises GroupError while its partition loads."""
        if self.rt.topic_exists:
            self.rt.check_partition(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return None
        stable = group.is_in(GroupState.STABLE)
        members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.metadata(group.protocol_name) if stable else b"",
                                     m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupDescription(group.group_id, group.state.value, group.protocol_type or "",
                                (group.protocol_name or "") if stable else "", members)

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        for group_id in group_ids:
            try:
                if not self.rt.topic_exists:
                    raise group_error(ke.GroupIdNotFoundError)
                self.rt.check_partition(group_id)
                if group_id in self.consumer.groups:
                    self._delete_consumer_group(group_id)
                    results[group_id] = NONE
                    continue
                if group_id in self.share.groups:  # its share-partition state: the broker deletes it next
                    self.share.delete_group(group_id)
                    results[group_id] = NONE
                    continue
                if self.streams is not None and group_id in self.streams.groups:
                    self._delete_streams_group(group_id)
                    results[group_id] = NONE
                    continue
                group = self.groups.get(group_id)
                if group is None or group.is_in(GroupState.DEAD):
                    raise group_error(ke.GroupIdNotFoundError)
                if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                               GroupState.COMPLETING_REBALANCE):
                    raise group_error(ke.NonEmptyGroupError)
                self._delete_group(group)
                results[group_id] = NONE
            except GroupError as exc:
                results[group_id] = exc.errno
            except AppendFailed as exc:
                results[group_id] = exc.errno
        return results

    def _delete_consumer_group(self, group_id: str) -> None:
        """An empty KIP-848 group: its records and its offsets get tombstones in one batch."""
        consumer_group = self.consumer.groups[group_id]
        if consumer_group.members:
            raise group_error(ke.NonEmptyGroupError)
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None)
            for t, p, _ in self.offsets.partitions(group_id)]
        records += self.consumer.tombstones(consumer_group)
        self.rt.append(group_id, records, APPEND_ERRORS_GROUP)
        self.offsets.delete_group(group_id)
        self.consumer.forget(group_id)

    def _delete_streams_group(self, group_id: str) -> None:
        """An empty streams group: its records and its offsets get tombstones in one batch."""
        streams_group = self.streams.groups[group_id]
        if streams_group.members:
            raise group_error(ke.NonEmptyGroupError)
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None)
            for t, p, _ in self.offsets.partitions(group_id)]
        records += self.streams.tombstones(streams_group)
        self.rt.append(group_id, records, APPEND_ERRORS_GROUP)
        self.offsets.delete_group(group_id)
        self.streams.forget(group_id)

    def _delete_group(self, group: ClassicGroup) -> None:
        gid = group.group_id
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(gid, t, p)), None) for t, p, _ in self.offsets.partitions(gid)]
        records.append((encode_group_metadata_key(GroupMetadataKey(gid)), None))
        self.rt.append(gid, records, APPEND_ERRORS_GROUP)
        self.offsets.delete_group(gid)
        self.membership.remove_group(group)
