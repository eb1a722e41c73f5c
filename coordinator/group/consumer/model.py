"""Consumer group state of the KIP-848 protocol: group epoch, target assignment (epoch and per-member
partitions), members with their epochs and current assignment, and the partition ownership map.

Pure state, no I/O. Invariant (checked by `ConsumerGroup.update_member`): a partition is held —
assigned or pending revocation — by at most one member at a time; the ownership map
`partition_owner` is derived from members' assignments and kept in step with every member change.
Model: Kafka's ConsumerGroup / ConsumerGroupMember / MemberState.
"""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import ClassVar

Assignment = dict[uuid.UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """Values as stored in ConsumerGroupCurrentMemberAssignmentValue.State."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def freeze(assignment: dict[uuid.UUID, set[int]] | dict[uuid.UUID, frozenset[int]]) -> Assignment:
    """Canonical form: no empty topics, frozensets."""
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def partitions_of(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


@dataclass(frozen=True)
class ClassicInfo:
    """A member of a consumer group that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription metadata) as it joined with


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicInfo | None = None

    def replace(self, **changes) -> "ConsumerMember":
        return dataclasses.replace(self, **changes)

    def held(self) -> set[tuple[uuid.UUID, int]]:
        """Partitions this member may still be consuming: assigned plus pending revocation."""
        return partitions_of(self.assigned) | partitions_of(self.pending_revocation)


class OwnershipConflict(RuntimeError):
    """A bug: two members would hold the same partition."""


@dataclass
class ConsumerGroup:
    protocol_type: ClassVar[str] = "consumer"  # as ListGroups shows it
    group_type: ClassVar[str] = "consumer"
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    partition_owner: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    # subscribed topic metadata as last used for the target assignment: name -> (topic id, partitions)
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)
    assignor_name: str = ""

    def snapshot(self) -> "ConsumerGroup":
        """A copy to restore if a change cannot be written (members and assignments are immutable,
        so copying the containers is enough)."""
        return dataclasses.replace(self, members=dict(self.members), target=dict(self.target),
                                   static_members=dict(self.static_members),
                                   partition_owner=dict(self.partition_owner),
                                   subscription_metadata=dict(self.subscription_metadata),
                                   resolved_regexes=dict(self.resolved_regexes))

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state != MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def update_member(self, member: ConsumerMember) -> None:
        """Insert or replace a member, keeping the ownership map and static-member index in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        for tp in member.held():
            owner = self.partition_owner.get(tp)
            if owner is not None and owner != member.member_id:
                if old is not None:
                    self._claim(old)
                raise OwnershipConflict(f"{tp} held by {owner}, not assignable to {member.member_id}")
        self._claim(member)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        old = self.members.pop(member_id, None)
        if old is None:
            return None
        self._release(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        return old

    def _release(self, member: ConsumerMember) -> None:
        for tp in member.held():
            if self.partition_owner.get(tp) == member.member_id:
                del self.partition_owner[tp]

    def _claim(self, member: ConsumerMember) -> None:
        for tp in member.held():
            self.partition_owner[tp] = member.member_id

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.partition_owner.get((topic_id, partition))

    def subscribed_topic_names(self) -> set[str]:
        """Topic names the members subscribe to, by name or through a resolved regex."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names.update(self.resolved_regexes.get(m.subscribed_topic_regex, ()))
        return names

    def member_topic_names(self, member: ConsumerMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names
