"""coordinator/group/consumer/reconciliation.py + model.py: revoke before assign; a partition is never held
by two members; the member epoch moves to the target only once nothing is pending revocation."""
from __future__ import annotations

import uuid

import pytest

from minikafka.coordinator.group.consumer.model import ConsumerGroup, ConsumerMember, MemberState, OwnershipConflict
from minikafka.coordinator.group.consumer.reconciliation import reconcile

T = uuid.UUID(int=1)


def group_with(*members: ConsumerMember) -> ConsumerGroup:
    g = ConsumerGroup("g")
    for m in members:
        g.update_member(m)
    return g


def test_new_member_gets_target_at_once():
    g = group_with(ConsumerMember("a"))
    nxt = reconcile(g.members["a"], 1, {T: frozenset({0, 1})}, {}, g.owner_of)
    assert (nxt.state, nxt.member_epoch, nxt.previous_member_epoch) == (MemberState.STABLE, 1, 0)
    assert nxt.assigned == {T: frozenset({0, 1})}


def test_revoke_before_assign():
    a = ConsumerMember("a", member_epoch=1, assigned={T: frozenset({0, 1})})
    b = ConsumerMember("b")
    g = group_with(a, b)
    # target epoch 2: a keeps 0, b gets 1
    b2 = reconcile(b, 2, {T: frozenset({1})}, {}, g.owner_of)
    assert b2.state == MemberState.UNRELEASED_PARTITIONS and b2.assigned == {} and b2.member_epoch == 2
    g.update_member(b2)
    a2 = reconcile(a, 2, {T: frozenset({0})}, {T: frozenset({0, 1})}, g.owner_of)
    assert a2.state == MemberState.UNREVOKED_PARTITIONS and a2.member_epoch == 1
    assert a2.assigned == {T: frozenset({0})} and a2.pending_revocation == {T: frozenset({1})}
    g.update_member(a2)
    assert g.owner_of(T, 1) == "a"
    # a still reports partition 1: stays
    assert reconcile(a2, 2, {T: frozenset({0})}, {T: frozenset({0, 1})}, g.owner_of) == a2
    # a reports it gave 1 up: moves to epoch 2, partition 1 free
    a3 = reconcile(a2, 2, {T: frozenset({0})}, {T: frozenset({0})}, g.owner_of)
    assert (a3.state, a3.member_epoch, a3.previous_member_epoch) == (MemberState.STABLE, 2, 1)
    g.update_member(a3)
    assert g.owner_of(T, 1) is None
    b3 = reconcile(b2, 2, {T: frozenset({1})}, {}, g.owner_of)
    assert b3.state == MemberState.STABLE and b3.assigned == {T: frozenset({1})}


def test_two_members_cannot_hold_one_partition():
    g = group_with(ConsumerMember("a", assigned={T: frozenset({0})}))
    with pytest.raises(OwnershipConflict):
        g.update_member(ConsumerMember("b", assigned={T: frozenset({0})}))
    assert "b" not in g.members and g.owner_of(T, 0) == "a"
    g.remove_member("a")
    g.update_member(ConsumerMember("b", assigned={T: frozenset({0})}))
    assert g.owner_of(T, 0) == "b"
