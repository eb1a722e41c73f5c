"""Classic group state: members, generation, protocol, and the explicit state machine.

Pure state (no I/O, no timers): the coordinator drives it and owns timers and records. Join/sync
"futures" are any objects with done()/set_result() (asyncio futures in the broker). Model: Kafka's
ClassicGroup / ClassicGroupMember / ClassicGroupState.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import kafka.errors as ke

NO_LEADER = ""
CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous(self) -> frozenset["GroupState"]:
        return _VALID_PREVIOUS[self]


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    """A bug: the coordinator asked for a transition the state machine forbids."""


class GroupError(Exception):
    """A request-level failure carrying its Kafka error code (mapped in broker/errors.py)."""

    errno = ke.UnknownError.errno

    def __init__(self, errno: int | None = None, message: str = "") -> None:
        super().__init__(message)
        if errno is not None:
            self.errno = errno


def group_error(error_class: type, message: str = "") -> GroupError:
    return GroupError(error_class.errno, message)


@dataclass
class JoinResult:
    error: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = NO_LEADER
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Any = None
    awaiting_sync: Any = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise IllegalStateTransition(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False  # new members can be expired while awaiting join
        return self.is_awaiting_join or self.is_awaiting_sync


def _complete(future: Any, result: Any) -> bool:
    if future is None or future.done():
        return False
    future.set_result(result)
    return True


class ClassicGroup:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY, *, now_ms: int,
                 generation_id: int = 0, protocol_type: str | None = None, protocol_name: str | None = None,
                 leader_id: str | None = None, state_timestamp: int | None = None) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        self.state_timestamp: int | None = now_ms if state_timestamp is None else state_timestamp
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
                f"members={len(self.members)})")

    # -------------------------------------------------------------------------- queries

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in GroupState.PREPARING_REBALANCE.valid_previous

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID, as Kafka's validateMember."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise group_error(ke.UnknownMemberIdError)
            if existing != member_id:
                raise group_error(ke.FencedInstanceIdError)
        if member_id not in self.members:
            raise group_error(ke.UnknownMemberIdError)

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols.get(n, 0) == len(self.members) for n in protocol_names))

    def candidate_protocols(self) -> set[str]:
        return {name for name, count in self.supported_protocols.items() if count == len(self.members)}

    def select_protocol(self) -> str:
        if not self.members:
            raise IllegalStateTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            name = m.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=lambda n: votes[n])

    def join_members(self) -> list[tuple[str, str | None, bytes]]:
        """Member list for the leader's JoinGroup response (metadata of the selected protocol)."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise IllegalStateTransition(f"no member metadata for group {self.group_id} in {self.state.value}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def join_result(self, member_id: str, *, members: bool = False, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(0, self.generation_id, self.protocol_type, self.protocol_name, self.leader_id or NO_LEADER,
                          member_id, self.join_members() if members else [], skip_assignment)

    # -------------------------------------------------------------------------- changes

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in state.valid_previous:
            raise IllegalStateTransition(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now_ms

    def _count_protocols(self, member: Member, delta: int) -> None:
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def add(self, member: Member, join_future: Any = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalStateTransition(f"static member {member.group_instance_id} already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise IllegalStateTransition("group and member protocol types differ")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        member.awaiting_join = join_future
        if member.is_awaiting_join:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_future: Any) -> None:
        self._count_protocols(member, -1)
        member.protocols = list(protocols)
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_future is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif join_future is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = join_future

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """A static member rejoined with an unknown member id: fence the old id, keep everything else."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise IllegalStateTransition(f"cannot replace unknown member {old_member_id}")
        fenced = ke.FencedInstanceIdError.errno
        self.complete_join(old, JoinResult(error=fenced, member_id=old_member_id))
        self.complete_sync(old, SyncResult(error=fenced))
        new = Member(new_member_id, old.group_instance_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
                     old.session_timeout_ms, old.protocol_type, list(old.protocols), old.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def complete_join(self, member: Member, result: JoinResult) -> bool:
        if member.is_awaiting_join:
            future, member.awaiting_join = member.awaiting_join, None
            self.num_awaiting_join -= 1
            return _complete(future, result)
        return False

    def complete_sync(self, member: Member, result: SyncResult) -> bool:
        if member.is_awaiting_sync:
            future, member.awaiting_sync = member.awaiting_sync, None
            return _complete(future, result)
        return False

    def maybe_elect_new_joined_leader(self) -> bool:
        """True if the leader rejoined or another joined member became leader."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics of all members' ConsumerProtocolSubscription (v0 prefix); None if unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(parse_subscription_topics(m.metadata(self.protocol_name)))
        except (ValueError, struct.error, UnicodeDecodeError):
            return None
        return topics


def parse_subscription_topics(data: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (any version: v0 is the prefix of all)."""
    (_version, n) = struct.unpack_from(">hi", data, 0)
    if n < 0:
        raise ValueError("null topic array")
    pos, topics = 6, []
    for _ in range(n):
        (length,) = struct.unpack_from(">h", data, pos)
        if length < 0 or pos + 2 + length > len(data):
            raise ValueError("bad topic string")
        topics.append(data[pos + 2:pos + 2 + length].decode("utf-8"))
        pos += 2 + length
    return topics
