"""The share-group part of the group coordinator (Kafka 4.3's GroupMetadataManager.shareGroupHeartbeat):
ShareGroupHeartbeat, ShareGroupDescribe, member session timers, the target assignment, and the records that
make a group survive a restart.

Runs on the event loop thread beside the classic and consumer groups (a group id is in at most one of them);
the runtime (`rt`) owns the `__consumer_offsets` partitions, appends and timers. A change is written before
the heartbeat that caused it is answered; if the append fails the group is restored from a copy. Members
get their target assignment at once (member epoch = assignment epoch). A member that leaves or is fenced
keeps the records it acquired until its share session closes (ShareFetch/ShareAcknowledge with the final
epoch, or its connection closes) or their acquisition locks expire, as in Kafka: the group coordinator does
not touch the share-partitions (a release on leave would race the member's last acknowledgements).
"""
from __future__ import annotations

import copy
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import kafka.errors as ke

from minikafka.coordinator.group.errors import APPEND_ERRORS_GROUP, AppendFailed
from minikafka.coordinator.group.metadata import GroupError
from minikafka.coordinator.group.share import records as rec
from minikafka.coordinator.group.share.assignor import NAME as ASSIGNOR_NAME, assign
from minikafka.coordinator.group.share.model import ShareGroup, ShareMember

if TYPE_CHECKING:
    from minikafka.coordinator.group.runtime import GroupRuntime

log = logging.getLogger(__name__)

LEAVE_GROUP_MEMBER_EPOCH = -1
DEFAULTS = {"share.session.timeout.ms": 45000, "share.heartbeat.interval.ms": 5000}


@dataclass
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResult:
    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, frozenset[int]] | None = None


def _fail(error_class: type, message: str) -> GroupError:
    return GroupError(error_class.errno, message)


class ShareGroupCoordinator:
    def __init__(self, rt: "GroupRuntime", is_other_group: Callable[[str], bool], group_configs: Any = None,
                 max_size: int = 200) -> None:
        self.rt = rt
        self.is_other_group = is_other_group  # a classic or consumer group holds the id
        self.group_configs = group_configs  # broker/config/group_configs.GroupConfigStore or None
        self.max_size = max_size  # group.share.max.size
        self.groups: dict[str, ShareGroup] = {}
        # share-partitions newly assigned, whose state the broker initializes (start offset unset) before the
        # heartbeat that assigned them is answered (Kafka initializes them through the share coordinator)
        self.to_initialize: list[tuple[str, dict[uuid.UUID, frozenset[int]]]] = []
        # share-partitions of groups deleted by DeleteGroups whose state the broker still has to delete
        self.deleted_state: list[tuple[str, dict[uuid.UUID, frozenset[int]]]] = []

    def setting(self, group_id: str, name: str) -> int:
        if self.group_configs is None:
            return DEFAULTS[name]
        return int(self.group_configs.group_config(group_id, name))

    # ============================================================== heartbeat

    def heartbeat(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        try:
            self._validate(req)
            self.rt.check_partition(req.group_id, create=True)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req)
            return self._heartbeat(req)
        except GroupError as exc:
            return ShareHeartbeatResult(error=exc.errno, message=str(exc) or None)
        except AppendFailed as exc:
            return ShareHeartbeatResult(error=exc.errno)

    @staticmethod
    def _validate(req: ShareHeartbeat) -> None:
        if not req.group_id or not req.group_id.strip():
            raise _fail(ke.InvalidRequestError, "GroupId can't be empty.")
        if not req.member_id or not req.member_id.strip():
            raise _fail(ke.InvalidRequestError, "MemberId can't be empty.")
        if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise _fail(ke.InvalidRequestError, f"MemberEpoch {req.member_epoch} is invalid.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise _fail(ke.InvalidRequestError, "RackId can't be empty.")
        if req.member_epoch == 0 and not req.subscribed_topic_names:
            raise _fail(ke.InvalidRequestError, "SubscribedTopicNames must be set in first request.")

    def _heartbeat(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        created = group is None
        if group is None:
            if self.is_other_group(req.group_id):
                raise _fail(ke.GroupIdNotFoundError, f"Group {req.group_id} is not a share group.")
            if req.member_epoch != 0:
                raise _fail(ke.GroupIdNotFoundError, f"Share group {req.group_id} not found.")
            group = ShareGroup(req.group_id)
        snapshot = None if created else copy.deepcopy(group)
        member = group.members.get(req.member_id)
        if req.member_epoch == 0:
            if member is None and len(group.members) >= self.max_size:
                raise _fail(ke.GroupMaxSizeReachedError,
                            f"The share group has reached its maximum capacity of {self.max_size} members.")
            member = member or ShareMember(req.member_id)
        elif member is None:
            raise _fail(ke.UnknownMemberIdError, f"Member {req.member_id} is not a member of group {req.group_id}.")
        elif req.member_epoch != member.member_epoch:
            raise _fail(ke.FencedMemberEpochError,
                        f"The share group member has a {'smaller' if req.member_epoch < member.member_epoch else 'larger'}"
                        f" member epoch ({req.member_epoch}) than the one known by the group coordinator "
                        f"({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        updated = member.replace(
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None else member.subscribed_topic_names)
        records: list[rec.Record] = []
        try:
            new_member = req.member_id not in group.members
            bump = new_member or updated.subscribed_topic_names != member.subscribed_topic_names
            if new_member or updated != member:
                records.append(rec.member_metadata(group.group_id, updated.member_id, updated.rack_id,
                                                   updated.client_id, updated.client_host,
                                                   updated.subscribed_topic_names))
            group.members[updated.member_id] = updated
            if self._refresh_metadata(group) or bump:
                self._bump(group, records)
            if records:
                self.rt.append(group.group_id, records, APPEND_ERRORS_GROUP)
        except Exception:
            if snapshot is not None:
                self.groups[group.group_id] = snapshot
            raise
        if created:
            self.groups[group.group_id] = group
        current = self._reconcile(group, req.member_id)
        self._schedule_session(group.group_id, current.member_id)
        send = req.member_epoch == 0 or req.subscribed_topic_names is not None \
            or current.member_epoch != req.member_epoch
        return ShareHeartbeatResult(member_id=current.member_id, member_epoch=current.member_epoch,
                                    heartbeat_interval_ms=self.setting(group.group_id, "share.heartbeat.interval.ms"),
                                    assignment=dict(current.assigned) if send else None)

    def _refresh_metadata(self, group: ShareGroup) -> bool:
        """Re-read the subscribed topics' ids and partition counts; whether they changed."""
        metadata: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed_topics():
            info = self.rt.catalog.get(name)
            if info is not None and not getattr(info, "internal", False):
                metadata[name] = (info.topic_id, info.partitions)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _bump(self, group: ShareGroup, records: list[rec.Record]) -> None:
        """A new group epoch and, at once, its assignment; the share-partitions it assigns are recorded as
        having state (so deleting the group or its offsets knows what to delete)."""
        group.group_epoch += 1
        records.append(rec.group_metadata(group.group_id, group.group_epoch))
        self._assign(group)
        names = {tid: name for name, (tid, _n) in group.subscription_metadata.items()}
        new: dict[uuid.UUID, frozenset[int]] = {}
        for assigned in group.target.values():
            for tid, ps in assigned.items():
                name, known = group.initialized.get(tid, (names.get(tid, ""), frozenset()))
                if not ps <= known:
                    group.initialized[tid] = (name, known | ps)
                    new[tid] = new.get(tid, frozenset()) | (ps - known)
        if new:
            records.append(rec.state_partitions(group.group_id, group.initialized))
            self.to_initialize.append((group.group_id, new))

    def _assign(self, group: ShareGroup) -> None:
        group.target = assign(list(group.members.values()), group.subscription_metadata)
        group.assignment_epoch = group.group_epoch

    @staticmethod
    def _reconcile(group: ShareGroup, member_id: str) -> ShareMember:
        """The member moves to the group's current target (at its heartbeat)."""
        member = group.members[member_id]
        if member.member_epoch != group.assignment_epoch:
            member = group.members[member_id] = member.replace(member_epoch=group.assignment_epoch,
                                                               assigned=group.target.get(member_id, {}))
        return member

    def _leave(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None or req.member_id not in group.members:
            if group is None and self.is_other_group(req.group_id):
                raise _fail(ke.GroupIdNotFoundError, f"Group {req.group_id} is not a share group.")
            raise _fail(ke.UnknownMemberIdError, f"Member {req.member_id} is not a member of group {req.group_id}.")
        self._remove_member(group, req.member_id)
        return ShareHeartbeatResult(member_id=req.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                    heartbeat_interval_ms=0)

    def _remove_member(self, group: ShareGroup, member_id: str) -> None:
        snapshot = copy.deepcopy(group)
        records = [rec.member_metadata(group.group_id, member_id, tombstone=True)]
        del group.members[member_id]
        try:
            self._refresh_metadata(group)
            self._bump(group, records)
            self.rt.append(group.group_id, records, APPEND_ERRORS_GROUP)
        except Exception:
            self.groups[group.group_id] = snapshot
            raise
        self.rt.cancel(self._session_key(group.group_id, member_id))

    # ============================================================== sessions

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> str:
        return f"sg-session-{group_id}-{member_id}"

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self.rt.schedule(self._session_key(group_id, member_id), self.setting(group_id, "share.session.timeout.ms"),
                         self._session_expired, group_id, member_id)

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        log.info("share group %s: member %s fenced (session timeout)", group_id, member_id)
        try:
            self._remove_member(group, member_id)
        except AppendFailed:
            log.warning("share group %s: removing member %s failed; retried at the next timeout", group_id, member_id)
            self._schedule_session(group_id, member_id)

    # ============================================================== loading (replay)

    def replay(self, record_type: int, group_id: str, member_id: str | None, value: Any) -> None:
        if not group_id:
            return
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[group_id] = ShareGroup(group_id)
        if record_type == rec.GROUP_METADATA:
            if value is None:
                del self.groups[group_id]
            else:
                group.group_epoch = value.epoch
        elif record_type == rec.MEMBER_METADATA and member_id is not None:
            if value is None:
                group.members.pop(member_id, None)
            else:
                group.members[member_id] = ShareMember(member_id, rack_id=value.rack_id, client_id=value.client_id,
                                                       client_host=value.client_host,
                                                       subscribed_topic_names=tuple(value.subscribed_topic_names))
        elif record_type == rec.STATE_PARTITION_METADATA:
            group.initialized = {} if value is None else {
                t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in value.initialized_topics}

    def on_partition_loaded(self, partition: int) -> None:
        """The loaded groups get their assignment back (recomputed at the stored epoch) and their members
        a session to heartbeat in."""
        for group in self.groups.values():
            if self.rt.partition_for(group.group_id) != partition:
                continue
            self._refresh_metadata(group)
            self._assign(group)
            for member_id in group.members:
                self._reconcile(group, member_id)
                self._schedule_session(group.group_id, member_id)

    def forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in group.members:
                self.rt.cancel(self._session_key(group_id, member_id))

    # ============================================================== administration, queries

    def delete_group(self, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
        """Delete an empty share group (tombstones); returns its share-partitions, whose state the caller
        deletes. NON_EMPTY_GROUP while it has members."""
        group = self.groups[group_id]
        if group.members:
            raise _fail(ke.NonEmptyGroupError, f"Group {group_id} is not empty.")
        self.rt.append(group_id, [rec.state_partitions(group_id, None), rec.group_metadata(group_id, None)],
                       APPEND_ERRORS_GROUP)
        self.forget(group_id)
        parts = {t: ps for t, (_name, ps) in group.initialized.items()}
        if parts:
            self.deleted_state.append((group_id, parts))
        return parts

    def forget_partitions(self, group_id: str, topic_ids: set[uuid.UUID] | None = None) -> None:
        """DeleteShareGroupOffsets: the group no longer has state for these topics (all if None)."""
        group = self.groups[group_id]
        if topic_ids is None:
            group.initialized.clear()
        else:
            for t in topic_ids:
                group.initialized.pop(t, None)
        self.rt.append(group_id, [rec.state_partitions(group_id, group.initialized)], APPEND_ERRORS_GROUP)

    def add_partitions(self, group_id: str, partitions: dict[uuid.UUID, tuple[str, frozenset[int]]]) -> ShareGroup:
        """AlterShareGroupOffsets on an empty group (created if missing): these share-partitions have state."""
        self.rt.check_partition(group_id, create=True)
        group = self.groups.get(group_id)
        if group is None:
            group = ShareGroup(group_id)
            self.rt.append(group_id, [rec.group_metadata(group_id, 0)], APPEND_ERRORS_GROUP)
            self.groups[group_id] = group
        for t, (name, ps) in partitions.items():
            old = group.initialized.get(t, (name, frozenset()))[1]
            group.initialized[t] = (name, old | ps)
        self.rt.append(group_id, [rec.state_partitions(group_id, group.initialized)], APPEND_ERRORS_GROUP)
        return group

    def list_groups(self, states: set[str], types: set[str]) -> list[ShareGroup]:
        if types and "share" not in types:
            return []
        return [g for g in self.groups.values()
                if not self.rt.is_loading(self.rt.partition_for(g.group_id))
                and (not states or g.state.value.lower() in states)]

    def describe(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        if not group_id:
            return ke.InvalidGroupIdError.errno, None, None
        if self.rt.topic_exists and self.rt.is_loading(self.rt.partition_for(group_id)):
            return ke.CoordinatorLoadInProgressError.errno, None, None
        if self.rt.owned is not None and self.rt.partition_for(group_id) not in self.rt.owned:
            return ke.NotCoordinatorError.errno, None, None
        group = self.groups.get(group_id)
        if group is not None:
            return 0, None, group
        if self.is_other_group(group_id):
            return ke.GroupIdNotFoundError.errno, f"Group {group_id} is not a share group.", None
        return ke.GroupIdNotFoundError.errno, f"Group {group_id} not found.", None

    @property
    def assignor_name(self) -> str:
        return ASSIGNOR_NAME

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.rt.catalog.by_id.get(topic_id)
        return info.name if info is not None else None
