"""The share groups' `simple` assignor (every partition of a subscribed topic has a member; with more members
than partitions they share) and the `group.share.*` broker bounds."""
from __future__ import annotations

import uuid

import pytest

from minikafka.coordinator.group.share import config
from minikafka.coordinator.group.share.assignor import assign
from minikafka.coordinator.group.share.model import ShareMember

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def members(*subs):
    return [ShareMember(f"m{i}", subscribed_topic_names=tuple(s)) for i, s in enumerate(subs)]


def test_fewer_members_than_partitions_split_them():
    got = assign(members(["a"], ["a"]), {"a": (T1, 5)})
    assert sorted(p for a in got.values() for p in a[T1]) == [0, 1, 2, 3, 4]
    assert sorted(len(a[T1]) for a in got.values()) == [2, 3]


def test_more_members_than_partitions_share_them():
    got = assign(members(["a"], ["a"], ["a"]), {"a": (T1, 2)})
    assert all(len(a[T1]) == 1 for a in got.values())
    assert {p for a in got.values() for p in a[T1]} == {0, 1}


def test_only_subscribed_topics_and_empty_topics():
    got = assign(members(["a"], ["b"]), {"a": (T1, 2), "b": (T2, 0)})
    assert got == {"m0": {T1: frozenset({0, 1})}, "m1": {}}


def test_broker_bounds():
    config.check(lambda _k: "")
    with pytest.raises(ValueError, match="group.share.record.lock.duration.ms must be within"):
        config.check({"group.share.record.lock.duration.ms": "1000"}.get)
    with pytest.raises(ValueError, match="heartbeat.interval.ms must be less than"):
        config.check({"group.share.heartbeat.interval.ms": "45000", "group.share.max.heartbeat.interval.ms": "60000",
                      "group.share.session.timeout.ms": "45000"}.get)
