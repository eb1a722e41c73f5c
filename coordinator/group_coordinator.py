"""The classic group coordinator: membership (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), offsets
(OffsetCommit/OffsetFetch/OffsetDelete) and administration (ListGroups/DescribeGroups/DeleteGroups),
with its state persisted as records in `__consumer_offsets`.

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
from typing import Any, Callable, Iterable

import kafka.errors as ke

from ..storage.partition_log import AppendOrigin
from .group_metadata import (
    ClassicGroup,
    GroupError,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    group_error,
)
from .group_offsets import OffsetAndMetadata, OffsetStore
from .group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    build_batch,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from .partitioning import partition_for

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's classic new-member join timeout

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = ke.CoordinatorLoadInProgressError.errno
NOT_COORDINATOR = ke.NotCoordinatorError.errno
COORDINATOR_NOT_AVAILABLE = ke.CoordinatorNotAvailableError.errno
UNKNOWN_MEMBER_ID = ke.UnknownMemberIdError.errno
ILLEGAL_GENERATION = ke.IllegalGenerationError.errno
REBALANCE_IN_PROGRESS = ke.RebalanceInProgressError.errno
INCONSISTENT_GROUP_PROTOCOL = ke.InconsistentGroupProtocolError.errno
INVALID_GROUP_ID = ke.InvalidGroupIdError.errno
INVALID_SESSION_TIMEOUT = ke.InvalidSessionTimeoutError.errno
MEMBER_ID_REQUIRED = ke.MemberIdRequiredError.errno
GROUP_MAX_SIZE_REACHED = ke.GroupMaxSizeReachedError.errno
GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno
NON_EMPTY_GROUP = ke.NonEmptyGroupError.errno
OFFSET_METADATA_TOO_LARGE = ke.OffsetMetadataTooLargeError.errno
GROUP_SUBSCRIBED_TO_TOPIC = ke.GroupSubscribedToTopicError.errno
UNSTABLE_OFFSET_COMMIT = ke.UnstableOffsetCommitError.errno
INVALID_COMMIT_OFFSET_SIZE = ke.InvalidCommitOffsetSizeError.errno
UNKNOWN_SERVER_ERROR = ke.UnknownError.errno


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
        )


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
_APPEND_ERRORS_GROUP = {
    ke.UnknownTopicOrPartitionError.errno: COORDINATOR_NOT_AVAILABLE,
    ke.NotEnoughReplicasError.errno: COORDINATOR_NOT_AVAILABLE,
    ke.RequestTimedOutError.errno: COORDINATOR_NOT_AVAILABLE,
    ke.NotLeaderForPartitionError.errno: NOT_COORDINATOR,
    ke.KafkaStorageError.errno: NOT_COORDINATOR,
    ke.MessageSizeTooLargeError.errno: UNKNOWN_SERVER_ERROR,
    ke.RecordListTooLargeError.errno: UNKNOWN_SERVER_ERROR,
    ke.InvalidFetchRequestError.errno: UNKNOWN_SERVER_ERROR,
}
_APPEND_ERRORS_COMMIT = dict(_APPEND_ERRORS_GROUP)
_APPEND_ERRORS_COMMIT.update({
    ke.MessageSizeTooLargeError.errno: INVALID_COMMIT_OFFSET_SIZE,
    ke.RecordListTooLargeError.errno: INVALID_COMMIT_OFFSET_SIZE,
    ke.InvalidFetchRequestError.errno: INVALID_COMMIT_OFFSET_SIZE,
})


class AppendFailed(Exception):
    def __init__(self, errno: int, cause: BaseException) -> None:
        super().__init__(f"append to {OFFSETS_TOPIC} failed: {cause!r}")
        self.errno = errno


class GroupCoordinator:
    """All classic groups of this broker (it coordinates every partition of __consumer_offsets)."""

    def __init__(self, config: GroupConfig, catalog: Any, error_code: Callable[[BaseException], int],
                 clock: Callable[[], float] = time.time) -> None:
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

    def ensure_topic(self) -> None:
        """Create __consumer_offsets on first use (Kafka creates it on the first FindCoordinator)."""
        if self.topic_exists:
            return
        self._catalog.create(OFFSETS_TOPIC, self.config.num_partitions, 1, {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        }, internal=True)
        self._topic_ready = True
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
        return partition

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], errors: dict[int, int], *,
                producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append records for `group_id`'s partition; returns the first offset or raises AppendFailed."""
        plog = self._catalog.partition_log(OFFSETS_TOPIC, self.partition_for(group_id))
        try:
            if plog is None:
                raise group_error(ke.UnknownTopicOrPartitionError)
            batch = build_batch(records, self._now_ms(), producer_id=producer_id, producer_epoch=producer_epoch,
                                transactional=transactional)
            info = plog.append(batch, origin=AppendOrigin.COORDINATOR)
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
        self._append(group.group_id, [self._group_record(group, assignment, empty)], _APPEND_ERRORS_GROUP)

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

    # ============================================================== JoinGroup

    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                         protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int, client_id: str, client_host: str,
                         api_version: int, reason: str | None = None) -> JoinResult:
        if not group_id:
            return JoinResult(error=INVALID_GROUP_ID, member_id=member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(error=INVALID_SESSION_TIMEOUT, member_id=member_id)
        try:
            self._check_partition(group_id, create=True)
        except GroupError as exc:
            return JoinResult(error=exc.errno, member_id=member_id)
        except Exception as exc:
            return JoinResult(error=self._error_code(exc), member_id=member_id)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                return JoinResult(error=UNKNOWN_MEMBER_ID, member_id=member_id)
            group = ClassicGroup(group_id, GroupState.EMPTY, now_ms=self._now_ms())
            try:
                self._store_group(group, empty=True)
            except AppendFailed as exc:
                return JoinResult(error=exc.errno, member_id=member_id)
            self.groups[group_id] = group
        request = _JoinRequest(group_id, member_id, group_instance_id, protocol_type, list(protocols),
                               session_timeout_ms, rebalance_timeout_ms, client_id, client_host, api_version,
                               reason, future)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            future.set_result(JoinResult(error=GROUP_MAX_SIZE_REACHED, member_id=""))
        elif unknown:
            self._join_new_member(group, request)
        else:
            self._join_existing_member(group, request)
        return await future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, req: "_JoinRequest") -> None:
        if group.is_in(GroupState.DEAD):
            req.future.set_result(JoinResult(error=COORDINATOR_NOT_AVAILABLE, member_id=""))
        elif not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            req.future.set_result(JoinResult(error=INCONSISTENT_GROUP_PROTOCOL, member_id=""))
        else:
            new_id = group.generate_member_id(req.client_id, req.group_instance_id)
            if req.group_instance_id is not None:
                existing = group.static_member_id(req.group_instance_id)
                if existing is not None:
                    log.info("static member %s of group %s rejoins with an unknown member id in state %s: "
                             "replacing member %s by %s", req.group_instance_id, group.group_id,
                             group.state.value, existing, new_id)
                    self._update_static_member_then_rebalance_or_complete_join(group, req, existing, new_id)
                else:
                    self._add_member_then_rebalance_or_complete_join(group, req, new_id)
            elif req.api_version >= 4:
                # v4+: register the id and ask the client to rejoin with it (KIP-394)
                group.pending_join_members.add(new_id)
                self._schedule(self._hb_key(group.group_id, new_id), req.session_timeout_ms,
                               self._expire_heartbeat, group, new_id)
                req.future.set_result(JoinResult(error=MEMBER_ID_REQUIRED, member_id=new_id))
            else:
                self._add_member_then_rebalance_or_complete_join(group, req, new_id)

    def _join_existing_member(self, group: ClassicGroup, req: "_JoinRequest") -> None:
        member_id = req.member_id
        if group.is_in(GroupState.DEAD):
            req.future.set_result(JoinResult(error=COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            req.future.set_result(JoinResult(error=INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if group.is_pending_member(member_id):
            self._add_member_then_rebalance_or_complete_join(group, req, member_id)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except GroupError as exc:
            req.future.set_result(JoinResult(error=exc.errno, member_id=member_id))
            return
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_then_rebalance_or_complete_join(group, member, req)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # the member lost the JoinGroup response: return the current generation again
                req.future.set_result(group.join_result(member_id, members=group.is_leader(member_id)))
            else:
                self._update_member_then_rebalance_or_complete_join(group, member, req)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # a leader's JoinGroup forces a rebalance (metadata changes the coordinator can't see)
                self._update_member_then_rebalance_or_complete_join(group, member, req)
            else:
                req.future.set_result(group.join_result(member_id))
        else:
            log.warning("member %s rejoins group %s in unexpected state %s", member_id, group.group_id,
                        group.state.value)
            req.future.set_result(JoinResult(error=UNKNOWN_MEMBER_ID, member_id=member_id))

    def _add_member_then_rebalance_or_complete_join(self, group: ClassicGroup, req: "_JoinRequest",
                                                    member_id: str) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols)
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, req.future)
        # a parked JoinGroup of a new member times out, in case the client went away (Kafka: 5 min)
        self._schedule(self._hb_key(group.group_id, member_id), self.config.new_member_join_timeout_ms,
                       self._expire_heartbeat, group, member_id)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"adding new member {member_id} with group instance id {req.group_instance_id}; "
                   f"client reason: {req.reason or 'not provided'}")

    def _update_member_then_rebalance_or_complete_join(self, group: ClassicGroup, member: Member,
                                                       req: "_JoinRequest") -> None:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, req.future)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"member {member.member_id} is (re)joining in state {group.state.value}; "
                   f"client reason: {req.reason or 'not provided'}")

    def _update_static_member_then_rebalance_or_complete_join(self, group: ClassicGroup, req: "_JoinRequest",
                                                              old_id: str, new_id: str) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._cancel(self._hb_key(group.group_id, old_id))
        self._reschedule_heartbeat(group, member)
        old_protocols = list(member.protocols)
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, req.future)
        if group.is_in(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # the selected protocol does not change: persist the new member id, no rebalance
                try:
                    self._store_group(group)
                except AppendFailed as exc:
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(req.group_instance_id, new_id, old_id)
                    self._reschedule_heartbeat(group, old)
                    req.future.set_result(JoinResult(
                        error=exc.errno, generation_id=group.generation_id, protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name, leader=current_leader or "", member_id=""))
                    return
                if req.api_version >= 9:
                    leader = group.is_leader(new_id)
                    group.complete_join(member, group.join_result(new_id, members=leader, skip_assignment=leader))
                else:
                    result = group.join_result(new_id)
                    result.leader = current_leader or ""
                    group.complete_join(member, result)
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {new_id} with instance id {req.group_instance_id} changed the "
                           "selected protocol")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # the leader may already hold the old member id in its assignment: rebalance again
            self._prepare_rebalance(group, f"updating metadata for static member {new_id} with instance id "
                                           f"{req.group_instance_id}")
        else:
            self._maybe_complete_join_phase(group)

    # ============================================================== rebalance machinery

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined()
                and group.previous_state is not GroupState.EMPTY):
            self._complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule(self._join_key(group.group_id), delay, self._try_complete_initial_rebalance,
                           group, delay, remaining)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now_ms())
        log.info("preparing to rebalance group %s with old generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self._schedule(self._join_key(group.group_id), group.rebalance_timeout_ms(),
                               self._complete_join, group)

    def _try_complete_initial_rebalance(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self._schedule(self._join_key(group.group_id), new_delay, self._try_complete_initial_rebalance,
                           group, new_delay, new_remaining)
        else:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self._cancel(self._join_key(group.group_id))
        if self.groups.get(group.group_id) is not group:
            return  # deleted or replaced meanwhile
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for m in gone:
            group.remove(m.member_id)
            self._cancel(self._hb_key(group.group_id, m.member_id))
        if gone:
            log.info("group %s removed dynamic members who did not rejoin: %s", group.group_id,
                     [m.member_id for m in gone])
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait another rebalance timeout for session timeouts to clear members
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self._schedule(self._join_key(group.group_id), group.rebalance_timeout_ms(), self._complete_join, group)
            return
        group.init_next_generation(self._now_ms())
        if group.is_in(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            try:
                self._store_group(group, assignment={})
            except AppendFailed as exc:
                log.warning("failed to write empty metadata for group %s: %s", group.group_id, exc)
            return
        log.info("stabilized group %s generation %d (%s) with %d members", group.group_id, group.generation_id,
                 group.protocol_name, len(group.members))
        for member in list(group.members.values()):
            result = group.join_result(member.member_id, members=group.is_leader(member.member_id))
            group.complete_join(member, result)
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule(self._sync_key(group.group_id), group.rebalance_timeout_ms(), self._expire_pending_sync,
                       group, group.generation_id)

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        self._propagate_assignment(group, NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ok = error == NONE
        for m in list(group.members.values()):
            result = SyncResult(error, group.protocol_type if ok else None, group.protocol_name if ok else None,
                                m.assignment)
            if group.complete_sync(m, result):
                self._reschedule_heartbeat(group, m)

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        self._schedule(self._hb_key(group.group_id, member.member_id),
                       member.session_timeout_ms if timeout_ms is None else timeout_ms,
                       self._expire_heartbeat, group, member.member_id)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self._cancel(self._sync_key(group.group_id))

    def _expire_pending_sync(self, group: ClassicGroup, generation_id: int) -> None:
        if generation_id != group.generation_id or not group.is_in(GroupState.COMPLETING_REBALANCE,
                                                                   GroupState.STABLE):
            return
        if group.pending_sync_members:
            pending = list(group.pending_sync_members)
            for member_id in pending:
                group.remove(member_id)
                self._cancel(self._hb_key(group.group_id, member_id))
            self._prepare_rebalance(group, f"removing {pending} on pending sync request expiration")

    def _expire_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        if group.is_in(GroupState.DEAD) or self.groups.get(group.group_id) is not group:
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s removed after session timeout", member_id, group.group_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s failed (session timeout), removing it", member_id, group.group_id)
        self._remove_member_and_update(group, member, f"removing member {member_id} on heartbeat expiration")

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.complete_join(member, JoinResult(error=UNKNOWN_MEMBER_ID, member_id=""))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    # ============================================================== SyncGroup / Heartbeat / LeaveGroup

    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        if not group_id:
            return SyncResult(error=INVALID_GROUP_ID)
        try:
            self._check_partition(group_id)
        except GroupError as exc:
            return SyncResult(error=exc.errno)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(error=UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            return SyncResult(error=COORDINATOR_NOT_AVAILABLE)
        try:
            group.validate_member(member_id, group_instance_id)
        except GroupError as exc:
            return SyncResult(error=exc.errno)
        if generation_id != group.generation_id:
            return SyncResult(error=ILLEGAL_GENERATION)
        if (_inconsistent(protocol_type, group.protocol_type)
                or _inconsistent(protocol_name, group.protocol_name)):
            return SyncResult(error=INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(GroupState.EMPTY):
            return SyncResult(error=UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncResult(error=REBALANCE_IN_PROGRESS)
        if group.is_in(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.members[member_id]
            return SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        group.members[member_id].awaiting_sync = future
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            assignment = dict(assignments)
            for mid in group.members:
                assignment.setdefault(mid, b"")
            log.info("assignment received from leader %s for group %s generation %d", member_id, group_id,
                     group.generation_id)
            try:
                self._store_group(group, assignment=assignment)
            except AppendFailed as exc:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    self._reset_and_propagate_assignment(group, exc.errno)
                    self._maybe_prepare_rebalance_or_complete_join(
                        group, f"error {exc.errno} storing the assignment of group {group_id}")
            else:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    self._set_and_propagate_assignment(group, assignment)
                    group.transition_to(GroupState.STABLE, self._now_ms())
        return await future

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync_members:
            self._cancel(self._sync_key(group.group_id))

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        if not group_id:
            return INVALID_GROUP_ID
        try:
            self._check_partition(group_id)
        except GroupError as exc:
            return exc.errno
        group = self.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(member_id, group_instance_id)
        except GroupError as exc:
            return exc.errno
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS
        return NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """(top-level error, [(member id, group instance id, error)]) for (member id, instance id, reason)s."""
        if not group_id:
            return INVALID_GROUP_ID, []
        try:
            self._check_partition(group_id)
        except GroupError as exc:
            return exc.errno, []
        group = self.groups.get(group_id)
        if group is None:
            return NONE, [(mid, iid, UNKNOWN_MEMBER_ID) for mid, iid, _ in members]
        if group.is_in(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, int]] = []
        left: list[str] = []
        for member_id, instance_id, reason in members:
            if member_id == "":
                # administrative removal of a static member by its instance id
                existing = group.static_member_id(instance_id) if instance_id is not None else None
                if existing is not None:
                    self._remove_current_member(group, existing, reason)
                    results.append((member_id, instance_id, NONE))
                    left.append(existing)
                else:
                    results.append((member_id, instance_id, UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self._cancel(self._hb_key(group_id, member_id))
                log.info("pending member %s left group %s", member_id, group_id)
                results.append((member_id, instance_id, NONE))
                left.append(member_id)
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except GroupError as exc:
                    results.append((member_id, instance_id, exc.errno))
                    continue
                self._remove_current_member(group, member_id, reason)
                results.append((member_id, instance_id, NONE))
                left.append(member_id)
        if left:
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, f"explicit LeaveGroup for {left}")
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return NONE, results

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.members[member_id]
        self._cancel(self._hb_key(group.group_id, member_id))
        log.info("member %s left group %s (LeaveGroup); client reason: %s", member_id, group.group_id,
                 reason or "not provided")
        group.complete_join(member, JoinResult(error=UNKNOWN_MEMBER_ID, member_id=""))
        group.remove(member_id)

    # ============================================================== offsets

    def commit_offsets(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       retention_time_ms: int, api_version: int,
                       partitions: list[tuple[str, int, int, int, str | None]]) -> dict[tuple[str, int], int]:
        """Per (topic, partition) error for (topic, partition, offset, leader epoch, metadata) commits of
        existing partitions (the handler answers unknown ones itself, as KafkaApis does)."""
        def fail(code: int) -> dict[tuple[str, int], int]:
            return {(t, p): code for t, p, *_ in partitions}

        try:
            self._check_partition(group_id, create=True)
        except GroupError as exc:
            return fail(exc.errno)
        except Exception as exc:
            return fail(self._error_code(exc))
        group = self.groups.get(group_id)
        created = False
        try:
            if group is None:
                if generation_id >= 0:
                    # v9+ says so; older versions keep the historical ILLEGAL_GENERATION
                    return fail(GROUP_ID_NOT_FOUND if api_version >= 9 else ILLEGAL_GENERATION)
                group, created = ClassicGroup(group_id, GroupState.EMPTY, now_ms=self._now_ms()), True
            else:
                self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        except GroupError as exc:
            return fail(exc.errno)
        if generation_id >= 0 and member_id in group.members:
            self._reschedule_heartbeat(group, group.members[member_id])
        now = self._now_ms()
        expire = now + retention_time_ms if retention_time_ms is not None and retention_time_ms >= 0 else -1
        results: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        values: list[tuple[str, int, OffsetAndMetadata]] = []
        max_meta = self.config.offset_metadata_max_bytes
        for topic, partition, offset, leader_epoch, metadata in partitions:
            if metadata is not None and len(metadata) > max_meta:
                results[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetCommitValue(offset, metadata or "", now, leader_epoch, expire)
            records.append((encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)),
                            encode_offset_commit_value(value)))
            values.append((topic, partition, OffsetAndMetadata(offset, leader_epoch, metadata or "", now, expire)))
            results[(topic, partition)] = NONE
        if records:
            try:
                base = self._append(group_id, records, _APPEND_ERRORS_COMMIT)
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
            self._check_partition(group_id, create=True)
        except GroupError as exc:
            return fail(exc.errno)
        except Exception as exc:
            return fail(self._error_code(exc))
        group = self.groups.get(group_id)
        created = False
        try:
            if group is None:
                if generation_id >= 0:
                    return fail(ILLEGAL_GENERATION)
                group, created = ClassicGroup(group_id, GroupState.EMPTY, now_ms=self._now_ms()), True
            else:
                self._validate_offset_commit(group, member_id, group_instance_id, generation_id, transactional=True)
        except GroupError as exc:
            return fail(exc.errno)
        now = self._now_ms()
        results: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        values: list[tuple[str, int, OffsetAndMetadata]] = []
        for topic, partition, offset, leader_epoch, metadata in partitions:
            if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
                continue
            records.append((encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)),
                            encode_offset_commit_value(OffsetCommitValue(offset, metadata or "", now, leader_epoch))))
            values.append((topic, partition, OffsetAndMetadata(offset, leader_epoch, metadata or "", now)))
            results[(topic, partition)] = NONE
        if records:
            try:
                base = self._append(group_id, records, _APPEND_ERRORS_COMMIT, producer_id=producer_id,
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

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool
                      ) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str, int]]]]]:
        """(group error, [(topic, [(partition, offset, leader epoch, metadata, error)])]); topics None = all."""
        if self.topic_exists:
            try:
                self._check_partition(group_id)
            except GroupError as exc:
                return exc.errno, []
        group = self.groups.get(group_id)
        known = group is not None and not group.is_in(GroupState.DEAD)
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
        if not self.topic_exists:
            return GROUP_ID_NOT_FOUND, {}
        try:
            self._check_partition(group_id)
        except GroupError as exc:
            return exc.errno, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return GROUP_ID_NOT_FOUND, {}
        if (group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
                and not group.uses_consumer_protocol()):
            return NON_EMPTY_GROUP, {}
        results: dict[tuple[str, int], int] = {}
        doomed: list[tuple[str, int]] = []
        for topic, partition in partitions:
            if group.is_subscribed_to(topic):
                results[(topic, partition)] = GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[(topic, partition)] = NONE
            if self.offsets.get(group_id, topic, partition) is not None:
                doomed.append((topic, partition))
        if doomed:
            try:
                self._append(group_id, [(encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None)
                                        for t, p in doomed], _APPEND_ERRORS_GROUP)
            except AppendFailed as exc:
                return exc.errno, {}
            for t, p in doomed:
                self.offsets.delete(group_id, t, p)
        return NONE, results

    # ============================================================== administration

    def list_groups(self, states: set[str], types: set[str]) -> tuple[int, list[ClassicGroup]]:
        states = {s.lower() for s in states}
        types = {t.lower() for t in types}
        out = []
        for group in self.groups.values():
            if self.partition_for(group.group_id) in self._loading or group.is_in(GroupState.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append(group)
        return (COORDINATOR_LOAD_IN_PROGRESS if self._loading else NONE), out

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """None if the group does not exist; raises GroupError while its partition loads."""
        if self.topic_exists:
            self._check_partition(group_id)
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
                if not self.topic_exists:
                    raise group_error(ke.GroupIdNotFoundError)
                self._check_partition(group_id)
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

    def _delete_group(self, group: ClassicGroup) -> None:
        gid = group.group_id
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(gid, t, p)), None) for t, p, _ in self.offsets.partitions(gid)]
        records.append((encode_group_metadata_key(GroupMetadataKey(gid)), None))
        self._append(gid, records, _APPEND_ERRORS_GROUP)
        self.offsets.delete_group(gid)
        self._remove_group(group)

    def _remove_group(self, group: ClassicGroup) -> None:
        group.transition_to(GroupState.DEAD, self._now_ms())
        self.groups.pop(group.group_id, None)
        self._cancel(self._join_key(group.group_id))
        self._cancel(self._sync_key(group.group_id))

    # ============================================================== retention

    def expire_offsets(self) -> int:
        """Kafka's offset retention pass: tombstones for expired offsets; empty groups whose offsets
        all expired are deleted. Returns the number of offsets removed."""
        now = self._now_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group_id in sorted(set(self.groups) | set(self.offsets.groups())):
            if self.partition_for(group_id) in self._loading:
                continue
            group = self.groups.get(group_id)
            if group is None:
                continue
            base = self._expiration_base(group)
            if base is None:
                continue
            expired, all_expired = self.offsets.expired(group_id, now, retention, base, group.is_subscribed_to)
            records: list[tuple[bytes, bytes | None]] = [
                (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None) for t, p in expired]
            delete_group = all_expired and group.is_in(GroupState.EMPTY)
            if delete_group:
                records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
            if not records:
                continue
            try:
                self._append(group_id, records, _APPEND_ERRORS_GROUP)
            except AppendFailed:
                continue
            for t, p in expired:
                self.offsets.delete(group_id, t, p)
            removed += len(expired)
            if expired:
                log.info("group %s: removed %d expired offsets", group_id, len(expired))
            if delete_group:
                log.info("group %s: empty with no offsets left, deleted", group_id)
                self._remove_group(group)
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

    # ============================================================== loading (replay)

    def replay_offset_commit(self, key: OffsetCommitKey, value: OffsetCommitValue | None, record_offset: int,
                             producer_id: int = -1, transactional: bool = False) -> None:
        if value is None:
            self.offsets.delete(key.group, key.topic, key.partition)
            return
        oam = OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                value.expire_timestamp, record_offset)
        if key.group not in self.groups:
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
        self.mark_loaded(partition)


@dataclass
class _JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    api_version: int
    reason: str | None
    future: asyncio.Future


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _with_record_offset(value: OffsetAndMetadata, record_offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                             value.expire_timestamp, record_offset)
