"""Classic group membership, a part of GroupCoordinator: the classic groups, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup and the rebalance machinery (join/sync barriers, initial rebalance delay, rebalance,
session and pending-sync timeouts, static members), their records and their replay — Kafka's
GroupMetadataManager, classic part. Appends, timers and partition state are the runtime's."""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from minikafka.coordinator.group.errors import (
    APPEND_ERRORS_GROUP,
    COORDINATOR_NOT_AVAILABLE,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NOT_COORDINATOR,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    AppendFailed,
)
from minikafka.coordinator.group.metadata import ClassicGroup, GroupError, GroupState, JoinResult, Member, SyncResult
from minikafka.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
)

if TYPE_CHECKING:
    from minikafka.coordinator.group.coordinator import GroupConfig
    from minikafka.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator
    from minikafka.coordinator.group.runtime import GroupRuntime

log = logging.getLogger(__name__)


class GroupMembership:
    """The classic groups of this broker (`groups`). `consumer` (the KIP-848 coordinator, set by GroupCoordinator)
    owns the groups of the consumer protocol; a group id is in at most one of the two."""

    def __init__(self, rt: GroupRuntime) -> None:
        self.rt = rt
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer: ConsumerGroupCoordinator = None  # type: ignore[assignment]  # wired by GroupCoordinator

    @property
    def config(self) -> GroupConfig:
        return self.rt.config

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
            self.rt.check_partition(group_id, create=True)
        except GroupError as exc:
            return JoinResult(error=exc.errno, member_id=member_id)
        except Exception as exc:
            return JoinResult(error=self.rt.error_code(exc), member_id=member_id)
        if group_id in self.consumer.groups:
            # a KIP-848 group: the member joins it with the classic protocol; an empty one is converted
            # back to a classic group
            if self.consumer.groups[group_id].members:
                return self.consumer.classic_join(
                    group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
                    protocol_type=protocol_type, protocols=protocols, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms, client_id=client_id, client_host=client_host,
                    api_version=api_version)
            try:
                self.consumer.delete_group(group_id)
            except GroupError:
                return JoinResult(error=INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            except AppendFailed as exc:
                return JoinResult(error=exc.errno, member_id=member_id)
        if any(group_id in getattr(getattr(self, part, None), "groups", ()) for part in ("streams", "share")):
            return JoinResult(error=INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)  # a streams or share group
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                return JoinResult(error=UNKNOWN_MEMBER_ID, member_id=member_id)
            group = ClassicGroup(group_id, GroupState.EMPTY, now_ms=self.rt.now_ms())
            try:
                self.store_group(group, empty=True)
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
                self.rt.schedule(self._hb_key(group.group_id, new_id), req.session_timeout_ms,
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
        self.rt.schedule(self._hb_key(group.group_id, member_id), self.config.new_member_join_timeout_ms,
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
        self.rt.cancel(self._hb_key(group.group_id, old_id))
        self.reschedule_heartbeat(group, member)
        old_protocols = list(member.protocols)
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, req.future)
        if group.is_in(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # the selected protocol does not change: persist the new member id, no rebalance
                try:
                    self.store_group(group)
                except AppendFailed as exc:
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(req.group_instance_id, new_id, old_id)
                    self.reschedule_heartbeat(group, old)
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
            self.prepare_rebalance(group, f"updating metadata for static member {new_id} with instance id "
                                           f"{req.group_instance_id}")
        else:
            self._maybe_complete_join_phase(group)

    # ============================================================== rebalance machinery

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined()
                and group.previous_state is not GroupState.EMPTY):
            self._complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.rt.schedule(self._join_key(group.group_id), delay, self._try_complete_initial_rebalance,
                           group, delay, remaining)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.rt.now_ms())
        log.info("preparing to rebalance group %s with old generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self.rt.schedule(self._join_key(group.group_id), group.rebalance_timeout_ms(),
                               self._complete_join, group)

    def _try_complete_initial_rebalance(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.rt.schedule(self._join_key(group.group_id), new_delay, self._try_complete_initial_rebalance,
                           group, new_delay, new_remaining)
        else:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.rt.cancel(self._join_key(group.group_id))
        if self.groups.get(group.group_id) is not group:
            return  # deleted or replaced meanwhile
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for m in gone:
            group.remove(m.member_id)
            self.rt.cancel(self._hb_key(group.group_id, m.member_id))
        if gone:
            log.info("group %s removed dynamic members who did not rejoin: %s", group.group_id,
                     [m.member_id for m in gone])
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait another rebalance timeout for session timeouts to clear members
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self.rt.schedule(self._join_key(group.group_id), group.rebalance_timeout_ms(), self._complete_join, group)
            return
        group.init_next_generation(self.rt.now_ms())
        if group.is_in(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            try:
                self.store_group(group, assignment={})
            except AppendFailed as exc:
                log.warning("failed to write empty metadata for group %s: %s", group.group_id, exc)
            return
        log.info("stabilized group %s generation %d (%s) with %d members", group.group_id, group.generation_id,
                 group.protocol_name, len(group.members))
        for member in list(group.members.values()):
            result = group.join_result(member.member_id, members=group.is_leader(member.member_id))
            group.complete_join(member, result)
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.rt.schedule(self._sync_key(group.group_id), group.rebalance_timeout_ms(), self._expire_pending_sync,
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
                self.reschedule_heartbeat(group, m)

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        self.rt.schedule(self._hb_key(group.group_id, member.member_id),
                       member.session_timeout_ms if timeout_ms is None else timeout_ms,
                       self._expire_heartbeat, group, member.member_id)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.rt.cancel(self._sync_key(group.group_id))

    def _expire_pending_sync(self, group: ClassicGroup, generation_id: int) -> None:
        if generation_id != group.generation_id or not group.is_in(GroupState.COMPLETING_REBALANCE,
                                                                   GroupState.STABLE):
            return
        if group.pending_sync_members:
            pending = list(group.pending_sync_members)
            for member_id in pending:
                group.remove(member_id)
                self.rt.cancel(self._hb_key(group.group_id, member_id))
            self.prepare_rebalance(group, f"removing {pending} on pending sync request expiration")

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
            self.rt.check_partition(group_id)
        except GroupError as exc:
            return SyncResult(error=exc.errno)
        if group_id in self.consumer.groups:
            return self.consumer.classic_sync(group_id=group_id, generation_id=generation_id, member_id=member_id,
                                              group_instance_id=group_instance_id, protocol_type=protocol_type,
                                              protocol_name=protocol_name)
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
                self.store_group(group, assignment=assignment)
            except AppendFailed as exc:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    self._reset_and_propagate_assignment(group, exc.errno)
                    self._maybe_prepare_rebalance_or_complete_join(
                        group, f"error {exc.errno} storing the assignment of group {group_id}")
            else:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    self._set_and_propagate_assignment(group, assignment)
                    group.transition_to(GroupState.STABLE, self.rt.now_ms())
        return await future

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync_members:
            self.rt.cancel(self._sync_key(group.group_id))

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        if not group_id:
            return INVALID_GROUP_ID
        try:
            self.rt.check_partition(group_id)
        except GroupError as exc:
            return exc.errno
        if group_id in self.consumer.groups:
            return self.consumer.classic_heartbeat(group_id=group_id, generation_id=generation_id,
                                                   member_id=member_id, group_instance_id=group_instance_id)
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
        self.reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS
        return NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """(top-level error, [(member id, group instance id, error)]) for (member id, instance id, reason)s."""
        if not group_id:
            return INVALID_GROUP_ID, []
        try:
            self.rt.check_partition(group_id)
        except GroupError as exc:
            return exc.errno, []
        if group_id in self.consumer.groups:
            return self.consumer.classic_leave(group_id, members)
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
                self.rt.cancel(self._hb_key(group_id, member_id))
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
        self.rt.cancel(self._hb_key(group.group_id, member_id))
        log.info("member %s left group %s (LeaveGroup); client reason: %s", member_id, group.group_id,
                 reason or "not provided")
        group.complete_join(member, JoinResult(error=UNKNOWN_MEMBER_ID, member_id=""))
        group.remove(member_id)

    # ============================================================== records, timers, lifecycle

    def group_record(self, group: ClassicGroup, assignment: dict[str, bytes] | None = None,
                     empty: bool = False) -> tuple[bytes, bytes]:
        """The GroupMetadata record of `group` (members with `assignment`, or their own; none if `empty`)."""
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

    def store_group(self, group: ClassicGroup, assignment: dict[str, bytes] | None = None,
                    empty: bool = False) -> None:
        self.rt.append(group.group_id, [self.group_record(group, assignment, empty)], APPEND_ERRORS_GROUP)

    @staticmethod
    def _hb_key(group_id: str, member_id: str) -> str:
        return f"heartbeat-{group_id}-{member_id}"

    @staticmethod
    def _join_key(group_id: str) -> str:
        return f"join-{group_id}"

    @staticmethod
    def _sync_key(group_id: str) -> str:
        return f"sync-{group_id}"

    def cancel_group_timers(self, group: ClassicGroup) -> None:
        self.rt.cancel(self._join_key(group.group_id))
        self.rt.cancel(self._sync_key(group.group_id))
        for mid in list(group.members) + list(group.pending_join_members):
            self.rt.cancel(self._hb_key(group.group_id, mid))

    def remove_group(self, group: ClassicGroup) -> None:
        """The group is dead: gone from memory with its barrier timers (its records are the caller's)."""
        group.transition_to(GroupState.DEAD, self.rt.now_ms())
        self.groups.pop(group.group_id, None)
        self.rt.cancel(self._join_key(group.group_id))
        self.rt.cancel(self._sync_key(group.group_id))

    def replay_group_metadata(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        old = self.groups.pop(key.group, None)
        if old is not None:
            self.cancel_group_timers(old)
        if value is None:
            return
        group = ClassicGroup(key.group, GroupState.STABLE if value.members else GroupState.EMPTY,
                             now_ms=self.rt.now_ms(), generation_id=value.generation,
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

    def on_partition_loaded(self, partition: int) -> None:
        """After replay: start session timers of the partition's loaded members, enforce group.max.size."""
        for group in list(self.groups.values()):
            if self.rt.partition_for(group.group_id) != partition:
                continue
            group.subscribed_topics = group.compute_subscribed_topics()
            for member in group.members.values():
                self.reschedule_heartbeat(group, member)
            if len(group.members) > self.config.max_size and group.can_rebalance():
                self.prepare_rebalance(group, "loaded group has more members than group.max.size")

    def forget_partition(self, partition: int) -> None:
        """This node no longer coordinates `partition`: its groups are dropped, and their waiting joins and
        syncs answered NOT_COORDINATOR so that their members find the new coordinator."""
        not_coordinator = NOT_COORDINATOR
        for group_id in [g for g in self.groups if self.rt.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            self.cancel_group_timers(group)
            for member in list(group.members.values()):
                for fut, result in ((member.awaiting_join, JoinResult(error=not_coordinator, member_id=member.member_id)),
                                    (member.awaiting_sync, SyncResult(error=not_coordinator))):
                    if fut is not None and not fut.done():
                        fut.set_result(result)


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
