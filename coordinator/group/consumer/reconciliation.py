"""Member reconciliation (Kafka's CurrentAssignmentBuilder): move one member from its current
assignment towards its target, one safe step per heartbeat.

Revoke before assign: partitions leaving the member go to `pending_revocation` first and the member
keeps its epoch (state UNREVOKED_PARTITIONS) until it reports, in a heartbeat's owned partitions, that
it no longer has them; only then does it move to the target epoch. A partition the target gives to
this member while another member still holds it is withheld (state UNRELEASED_PARTITIONS) until it is
free. So no partition is ever held by two members.
"""
from __future__ import annotations

import uuid
from typing import Callable

from minikafka.coordinator.group.consumer.model import Assignment, ConsumerMember, MemberState, freeze

OwnerOf = Callable[[uuid.UUID, int], "str | None"]


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
              owner_of: OwnerOf) -> ConsumerMember:
    """The member's next state. `owned`: the partitions the member reported in this heartbeat (None
    when it did not send them)."""
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _overlaps(owned, member.pending_revocation):
            return member  # still waiting for the member to give the partitions up
        return _next(member, target_epoch, target, owned, owner_of)
    if member.state == MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return _next(member, target_epoch, target, owned, owner_of)
    return member


def _overlaps(a: Assignment, b: Assignment) -> bool:
    return any(a.get(t, frozenset()) & ps for t, ps in b.items())


def _next(member: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
          owner_of: OwnerOf) -> ConsumerMember:
    keep: dict[uuid.UUID, set[int]] = {}
    revoke: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for t in set(member.assigned) | set(target):
        current = member.assigned.get(t, frozenset())
        wanted = target.get(t, frozenset())
        keep[t] = set(current & wanted)
        if current - wanted:
            revoke[t] = set(current - wanted)
        for p in wanted - current:
            owner = owner_of(t, p)
            if owner is None or owner == member.member_id:
                keep[t].add(p)
            else:
                unreleased = True
    if revoke and (owned is None or _overlaps(owned, revoke)):  # it may have dropped them already
        return member.replace(state=MemberState.UNREVOKED_PARTITIONS,
                              assigned=freeze({t: ps & target.get(t, frozenset())
                                               for t, ps in member.assigned.items()}),
                              pending_revocation=freeze(revoke))
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    previous = member.member_epoch if member.member_epoch != target_epoch else member.previous_member_epoch
    return member.replace(state=state, member_epoch=target_epoch, previous_member_epoch=previous,
                          assigned=freeze(keep), pending_revocation={})
