"""Classic-protocol members of a consumer group (Kafka 4.x "mixed" groups): JoinGroup, SyncGroup,
Heartbeat and LeaveGroup from members that speak the classic protocol are translated onto the
consumer group's model, and a non-empty classic group is upgraded online to a consumer group when a
member of the new protocol joins (`group.consumer.migration.policy` upgrade or bidirectional).

A classic member's generation is its member epoch. It is told REBALANCE_IN_PROGRESS in a heartbeat
when the group moved on or when it has partitions to give up or to receive, rejoins (its JoinGroup
subscription reports what it still owns, usually nothing for eager assignors), and gets its
assignment in SyncGroup; so the revoke-before-assign rule holds for it as for the others.
Model: Kafka's GroupMetadataManager.classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup and
ConsumerGroup.fromClassicGroup.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import kafka.errors as ke
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from minikafka.coordinator.group.errors import (
    APPEND_ERRORS_GROUP,
    GROUP_MAX_SIZE_REACHED,
    INCONSISTENT_GROUP_PROTOCOL,
    NONE,
    AppendFailed,
)
from minikafka.coordinator.group.metadata import GroupError, GroupState, JoinResult, SyncResult
from minikafka.coordinator.group.consumer import records as rec
from minikafka.coordinator.group.consumer.model import Assignment, ClassicInfo, ConsumerGroup, ConsumerMember, MemberState, freeze

if TYPE_CHECKING:
    from minikafka.coordinator.group.metadata import ClassicGroup

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL = "consumer"
UNKNOWN_MEMBER_ID = ke.UnknownMemberIdError.errno
ILLEGAL_GENERATION = ke.IllegalGenerationError.errno
FENCED_INSTANCE_ID = ke.FencedInstanceIdError.errno
REBALANCE_IN_PROGRESS = ke.RebalanceInProgressError.errno
MEMBER_ID_REQUIRED = ke.MemberIdRequiredError.errno


def _decode_subscription(metadata: bytes) -> Any:
    return ConsumerProtocolSubscription.decode(metadata)


class ClassicMembers:
    """Mixin of ConsumerGroupCoordinator."""

    groups: dict[str, ConsumerGroup]

    # ------------------------------------------------------------------------ helpers

    def _names_to_ids(self, parts: list[tuple[str, list[int]]]) -> Assignment:
        out: dict[uuid.UUID, set[int]] = {}
        for topic, partitions in parts:
            info = self.rt.catalog.get(topic)
            if info is not None:
                out.setdefault(info.topic_id, set()).update(p for p in partitions if 0 <= p < info.partitions)
        return freeze(out)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            static_id = group.static_members.get(instance_id)
            if static_id is None:
                raise GroupError(UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if static_id != member_id:
                raise GroupError(FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            raise GroupError(UNKNOWN_MEMBER_ID)
        return member

    def _assignment_bytes(self, member: ConsumerMember) -> bytes:
        TP = ConsumerProtocolAssignment.TopicPartition
        parts = []
        for topic_id, ps in sorted(member.assigned.items(), key=lambda kv: str(kv[0])):
            name = self.topic_name(topic_id)
            if name is not None:
                parts.append(TP(topic=name, partitions=sorted(ps)))
        version = 0
        if member.classic is not None and member.classic.protocols:
            try:
                version = min(_decode_subscription(member.classic.protocols[0][1]).version, 3)
            except Exception:
                version = 0
        return bytes(ConsumerProtocolAssignment(version=version, assigned_partitions=parts, user_data=None).encode())

    # ------------------------------------------------------------------------ online upgrade

    def convert_classic_group(self, classic: "ClassicGroup") -> tuple[ConsumerGroup, list[rec.Record]] | None:
        """The consumer group a Stable or Empty classic group of the consumer protocol becomes (with
        the records that create it), or None when the policy or the group does not allow it."""
        settings = self.configs.settings_for(classic.group_id)
        if settings.migration_policy not in ("upgrade", "bidirectional"):
            return None
        if classic.protocol_type != CONSUMER_PROTOCOL or not classic.is_in(GroupState.STABLE):
            return None
        if len(classic.members) > settings.max_size:
            return None
        group = ConsumerGroup(classic.group_id, group_epoch=classic.generation_id,
                              assignment_epoch=classic.generation_id)
        gid = group.group_id
        records: list[rec.Record] = []
        for m in classic.members.values():
            try:
                sub = _decode_subscription(m.metadata(classic.protocol_name))
                asg = ConsumerProtocolAssignment.decode(m.assignment) if m.assignment else None
            except Exception:
                return None
            assigned = self._names_to_ids([(tp.topic, list(tp.partitions)) for tp in (asg.assigned_partitions
                                                                                       if asg else [])])
            member = ConsumerMember(
                m.member_id, member_epoch=classic.generation_id, previous_member_epoch=classic.generation_id,
                state=MemberState.STABLE, instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=tuple(sub.topics or ()),
                rebalance_timeout_ms=m.rebalance_timeout_ms, assigned=assigned,
                classic=ClassicInfo(m.session_timeout_ms, tuple((n, bytes(md)) for n, md in m.protocols)))
            group.update_member(member)
            group.target[m.member_id] = assigned
            records += [rec.member_metadata(gid, member), rec.target_member(gid, m.member_id, assigned),
                        rec.current_assignment(gid, member)]
        for name in group.subscribed_topic_names():
            info = self.rt.catalog.get(name)
            if info is not None:
                group.subscription_metadata[name] = (info.topic_id, info.partitions)
        records += [rec.partition_metadata(gid, group.subscription_metadata),
                    rec.group_metadata(gid, group.group_epoch), rec.target_metadata(gid, group.assignment_epoch)]
        return group, records

    def maybe_downgrade(self, group: ConsumerGroup) -> None:
        """A consumer group whose members all speak the classic protocol becomes a classic group again
        (policy downgrade or bidirectional), which starts a rebalance: the members rejoin it."""
        from minikafka.coordinator.group.metadata import ClassicGroup, Member

        settings = self.configs.settings_for(group.group_id)
        if settings.migration_policy not in ("downgrade", "bidirectional"):
            return
        if not group.members or any(m.classic is None for m in group.members.values()):
            return
        gid = group.group_id
        classic = ClassicGroup(gid, GroupState.STABLE, now_ms=self.rt.now_ms(), generation_id=group.group_epoch,
                               protocol_type=CONSUMER_PROTOCOL)
        for m in group.members.values():
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                               m.classic.session_timeout_ms, CONSUMER_PROTOCOL, list(m.classic.protocols),
                               self._assignment_bytes(m)))
        classic.protocol_name = classic.select_protocol()
        classic.leader_id = next(iter(classic.members))
        records: list[rec.Record] = []
        for mid in group.members:
            records += [rec.current_assignment(gid, mid), rec.member_metadata(gid, mid)]
        records += self.tombstones(group)
        records.append(self.classic.group_record(classic))
        try:
            self.rt.append(gid, records, APPEND_ERRORS_GROUP)
        except AppendFailed as exc:
            log.warning("consumer group %s: downgrade to a classic group failed: %r", gid, exc)
            return
        self.forget(gid)
        self.classic.groups[gid] = classic
        classic.subscribed_topics = classic.compute_subscribed_topics()
        for member in classic.members.values():
            self.classic.reschedule_heartbeat(classic, member)
        self.classic.prepare_rebalance(classic, "the consumer group has only classic members left")

    # ------------------------------------------------------------------------ classic APIs

    def classic_join(self, *, group_id: str, member_id: str, group_instance_id: str | None, protocol_type: str,
                     protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                     client_id: str, client_host: str, api_version: int) -> JoinResult:
        group = self.groups[group_id]
        settings = self.configs.settings_for(group_id)
        if protocol_type != CONSUMER_PROTOCOL or not protocols:
            return JoinResult(error=INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        try:
            sub = _decode_subscription(protocols[0][1])
        except Exception:
            return JoinResult(error=INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        unknown = member_id == ""
        if unknown:
            member_id = f"{client_id}-{uuid.uuid4()}"
        existing_id = group.static_members.get(group_instance_id) if group_instance_id is not None else None
        if member_id not in group.members and existing_id is None and len(group.members) >= settings.max_size:
            return JoinResult(error=GROUP_MAX_SIZE_REACHED, member_id="")
        if unknown and group_instance_id is None and api_version >= 4:
            return JoinResult(error=MEMBER_ID_REQUIRED, member_id=member_id)
        snapshot = group.snapshot()
        change = self._change()
        replaced = None
        if existing_id is not None and existing_id != member_id:
            if not unknown:
                return JoinResult(error=FENCED_INSTANCE_ID, member_id=member_id)
            replaced = group.remove_member(existing_id)  # a static member restarted: it takes over
            target = group.target.pop(existing_id, None)
            change.records += [rec.current_assignment(group_id, existing_id),
                               rec.target_member(group_id, existing_id, None),
                               rec.member_metadata(group_id, existing_id)]
            member = replaced.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            if target is not None:
                group.target[member_id] = target
                change.records.append(rec.target_member(group_id, member_id, target))
            group.update_member(member)
            is_new, bump = True, False
        else:
            member = group.members.get(member_id)
            if member is None:
                if not unknown and group_instance_id is None:
                    return JoinResult(error=UNKNOWN_MEMBER_ID, member_id=member_id)
                member, is_new, bump = ConsumerMember(member_id, instance_id=group_instance_id), True, True
            elif member.classic is None:
                return JoinResult(error=UNKNOWN_MEMBER_ID, member_id=member_id)
            else:
                is_new, bump = False, False
        owned_parts = getattr(sub, "owned_partitions", None) or []  # ConsumerProtocolSubscription v1+
        owned = self._names_to_ids([(tp.topic, list(tp.partitions)) for tp in owned_parts])
        updated = member.replace(
            instance_id=group_instance_id if group_instance_id is not None else member.instance_id,
            client_id=client_id, client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=tuple(sub.topics or ()), subscribed_topic_regex=None, server_assignor=None,
            classic=ClassicInfo(session_timeout_ms, tuple((n, bytes(md)) for n, md in protocols)))
        try:
            nxt = self._update_and_reconcile(group, False, snapshot, member, updated, is_new, bump, owned, settings,
                                             change)
        except GroupError as exc:
            return JoinResult(error=exc.errno, member_id=member_id)
        except AppendFailed as exc:
            return JoinResult(error=exc.errno, member_id=member_id)
        if replaced is not None:
            self._fence_timers(group_id, replaced.member_id)
        self._after_change(group, member, nxt, settings)
        return JoinResult(error=NONE, generation_id=nxt.member_epoch, protocol_type=CONSUMER_PROTOCOL,
                          protocol_name=protocols[0][0], leader="", member_id=member_id, members=[])

    def classic_sync(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                     protocol_type: str | None, protocol_name: str | None) -> SyncResult:
        group = self.groups[group_id]
        try:
            member = self._classic_member(group, member_id, group_instance_id)
        except GroupError as exc:
            return SyncResult(error=exc.errno)
        if generation_id != member.member_epoch:
            return SyncResult(error=ILLEGAL_GENERATION)
        name = member.classic.protocols[0][0] if member.classic.protocols else None
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL) or \
                (protocol_name is not None and protocol_name != name):
            return SyncResult(error=INCONSISTENT_GROUP_PROTOCOL)
        self._schedule_session(group_id, member_id, member.classic.session_timeout_ms)
        return SyncResult(error=NONE, protocol_type=CONSUMER_PROTOCOL, protocol_name=name,
                          assignment=self._assignment_bytes(member))

    def classic_heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                          group_instance_id: str | None) -> int:
        group = self.groups[group_id]
        try:
            member = self._classic_member(group, member_id, group_instance_id)
        except GroupError as exc:
            return exc.errno
        if generation_id != member.member_epoch:
            return ILLEGAL_GENERATION
        self._schedule_session(group_id, member_id, member.classic.session_timeout_ms)
        waiting = any(group.owner_of(t, p) not in (None, member_id)
                      for t, ps in group.target.get(member_id, {}).items() for p in ps
                      if p not in member.assigned.get(t, frozenset()))
        if member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS or \
                (member.state == MemberState.UNRELEASED_PARTITIONS and not waiting):
            return REBALANCE_IN_PROGRESS
        return NONE

    def classic_leave(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                      ) -> tuple[int, list[tuple[str, str | None, int]]]:
        group = self.groups[group_id]
        results = []
        for member_id, instance_id, _reason in members:
            code = NONE
            try:
                if instance_id is not None:
                    static_id = group.static_members.get(instance_id)
                    if static_id is None:
                        raise GroupError(UNKNOWN_MEMBER_ID)
                    if member_id and static_id != member_id:
                        raise GroupError(FENCED_INSTANCE_ID)
                    member_id = member_id or static_id
                if member_id not in group.members:
                    raise GroupError(UNKNOWN_MEMBER_ID)
                self._remove_member(group, member_id, downgrade=False)
                group = self.groups[group_id]
            except GroupError as exc:
                code = exc.errno
            except AppendFailed as exc:
                code = exc.errno
            results.append((member_id, instance_id, code))
        self.maybe_downgrade(group)
        return NONE, results
