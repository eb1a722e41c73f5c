"""Streams group state (KIP-1071): group epoch, topology, target assignment (per member: active,
standby and warm-up tasks), members with their epochs and current tasks, and which process holds
each task. Pure state, no I/O. Model: Kafka's StreamsGroup / StreamsGroupMember / TasksTuple.

A task is (subtopology id, partition). Invariant kept by `StreamsGroup.update_member`: an active task
is held — assigned or pending revocation — by at most one process; the ownership maps
(`active_owner`, `standby_owners`, `warmup_owners`) are derived from the members and kept in step
with every member change. Active tasks carry the epoch they were assigned in (Kafka 4.3's
TasksTupleWithEpochs), which offset commits with an older member epoch are checked against.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import ClassVar, Iterable, Mapping

from minikafka.coordinator.group.streams.topology import ConfiguredTopology, StreamsTopology

Tasks = Mapping[str, frozenset[int]]  # subtopology id -> partitions
ActiveEpochs = Mapping[str, Mapping[int, int]]  # subtopology id -> partition -> assignment epoch

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """Values as stored in StreamsGroupCurrentMemberAssignmentValue.State."""
    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127


class StreamsGroupState(Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def freeze(tasks: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    """Canonical form: no empty subtopology, frozensets."""
    return {s: frozenset(ps) for s, ps in tasks.items() if ps}


def task_set(tasks: Tasks) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


@dataclass(frozen=True)
class TasksTuple:
    """Active, standby and warm-up tasks (Kafka's TasksTuple)."""
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def contains_any(self, other: "TasksTuple") -> bool:
        return any(_overlaps(getattr(self, k), getattr(other, k)) for k in ("active", "standby", "warmup"))


EMPTY_TASKS = TasksTuple()


def _overlaps(a: Tasks, b: Tasks) -> bool:
    return any(a.get(s, frozenset()) & ps for s, ps in b.items())


def active_of(epochs: ActiveEpochs) -> dict[str, frozenset[int]]:
    return freeze({s: set(ps) for s, ps in epochs.items()})


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    # current assignment: active tasks with their assignment epochs, standby and warm-up tasks
    active: ActiveEpochs = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    # tasks the member must give up before it moves on
    pending_active: ActiveEpochs = field(default_factory=dict)
    pending_standby: Tasks = field(default_factory=dict)
    pending_warmup: Tasks = field(default_factory=dict)

    def replace(self, **changes) -> "StreamsMember":
        return dataclasses.replace(self, **changes)

    def assigned(self) -> TasksTuple:
        return TasksTuple(active_of(self.active), dict(self.standby), dict(self.warmup))

    def pending(self) -> TasksTuple:
        return TasksTuple(active_of(self.pending_active), dict(self.pending_standby), dict(self.pending_warmup))

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch

    def active_epoch(self, subtopology: str, partition: int) -> int | None:
        """The epoch an active task (assigned or pending revocation) was assigned to this member in."""
        for source in (self.active, self.pending_active):
            epoch = source.get(subtopology, {}).get(partition)
            if epoch is not None:
                return epoch
        return None


class OwnershipConflict(RuntimeError):
    """A bug: two processes would hold the same active task."""


@dataclass
class StreamsGroup:
    protocol_type: ClassVar[str] = "streams"  # as ListGroups shows it
    group_type: ClassVar[str] = "streams"
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignment_timestamp: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    last_assignment_configs: dict[str, str] = field(default_factory=dict)
    topology: StreamsTopology | None = None
    configured: ConfiguredTopology | None = None  # derived, not stored
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, TasksTuple] = field(default_factory=dict)
    endpoint_information_epoch: int = 0
    shutdown_request_member_id: str | None = None
    active_owner: dict[tuple[str, int], str] = field(default_factory=dict)  # task -> process id
    standby_owners: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    warmup_owners: dict[tuple[str, int], set[str]] = field(default_factory=dict)

    def snapshot(self) -> "StreamsGroup":
        """A copy to restore if a change cannot be written (members are immutable)."""
        return dataclasses.replace(
            self, members=dict(self.members), target=dict(self.target),
            last_assignment_configs=dict(self.last_assignment_configs), active_owner=dict(self.active_owner),
            standby_owners={k: set(v) for k, v in self.standby_owners.items()},
            warmup_owners={k: set(v) for k, v in self.warmup_owners.items()})

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    # ---------------------------------------------------------------- members and ownership

    def update_member(self, member: StreamsMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        for task in self._active_tasks(member):
            owner = self.active_owner.get(task)
            if owner is not None:
                if old is not None:
                    self._claim(old)
                raise OwnershipConflict(f"active task {task} held by process {owner}, not assignable to "
                                        f"{member.member_id}")
        self._claim(member)
        self.members[member.member_id] = member

    def remove_member(self, member_id: str) -> StreamsMember | None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._release(old)
        if not self.members:
            self.shutdown_request_member_id = None
        return old

    @staticmethod
    def _active_tasks(member: StreamsMember) -> set[tuple[str, int]]:
        return task_set(active_of(member.active)) | task_set(active_of(member.pending_active))

    def _release(self, member: StreamsMember) -> None:
        for task in self._active_tasks(member):
            if self.active_owner.get(task) == member.process_id:
                del self.active_owner[task]
        for owners, tasks in ((self.standby_owners, (member.standby, member.pending_standby)),
                              (self.warmup_owners, (member.warmup, member.pending_warmup))):
            for t in tasks:
                for task in task_set(t):
                    holders = owners.get(task)
                    if holders is not None:
                        holders.discard(member.process_id)
                        if not holders:
                            del owners[task]

    def _claim(self, member: StreamsMember) -> None:
        for task in self._active_tasks(member):
            self.active_owner[task] = member.process_id
        for owners, tasks in ((self.standby_owners, (member.standby, member.pending_standby)),
                              (self.warmup_owners, (member.warmup, member.pending_warmup))):
            for t in tasks:
                for task in task_set(t):
                    owners.setdefault(task, set()).add(member.process_id)

    def current_active_process(self, subtopology: str, partition: int) -> str | None:
        return self.active_owner.get((subtopology, partition))

    def current_standby_processes(self, subtopology: str, partition: int) -> set[str]:
        return self.standby_owners.get((subtopology, partition), set())

    def current_warmup_processes(self, subtopology: str, partition: int) -> set[str]:
        return self.warmup_owners.get((subtopology, partition), set())

    def rebuild_ownership(self) -> list[str]:
        """After replay: the ownership maps from the members; returns members whose tasks conflicted
        (their current assignment is reset)."""
        members = list(self.members.values())
        self.members.clear()
        self.active_owner.clear()
        self.standby_owners.clear()
        self.warmup_owners.clear()
        reset = []
        for m in members:
            try:
                self.update_member(m)
            except OwnershipConflict:
                reset.append(m.member_id)
                self.update_member(m.replace(active={}, standby={}, warmup={}, pending_active={},
                                             pending_standby={}, pending_warmup={}, state=MemberState.STABLE))
        return reset

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's StreamsGroup.isSubscribedToTopic: source topics of the topology while the group has members."""
        if not self.members or self.topology is None:
            return False
        return topic in self.topology.source_topic_map()
