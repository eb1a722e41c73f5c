"""A share group and its members. Invariant: a member's `assigned` is the group's target for it at its
`member_epoch`; a member takes the current target (and `assignment_epoch` as its epoch) at its next heartbeat,
with nothing revoked first, since a partition may have several consumers."""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from typing import ClassVar

Assignment = dict[uuid.UUID, frozenset[int]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)

    def replace(self, **changes) -> "ShareMember":
        return replace(self, **changes)


@dataclass
class ShareGroup:
    protocol_type: ClassVar[str] = "share"  # as ListGroups shows it
    group_type: ClassVar[str] = "share"
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> assignment at assignment_epoch
    # topic name -> (topic id, partition count) of the subscribed topics when the epoch was last bumped
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    # share-partitions whose state the group has (ShareGroupStatePartitionMetadata InitializedTopics)
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}
