"""Consumer groups with kafka-python, aiokafka and a mixed group; static membership; cooperative-sticky.
Black-box: runs against minikafka and Kafka (--broker=kafka)."""
from __future__ import annotations

import time

import pytest

from tests.support.group_helpers import (
    AioConsumer,
    KafkaPythonConsumer,
    ThreadConsumer,
    committed_offsets,
    create_topic,
    group_assignment,
    group_broker,  # noqa: F401  (fixture)
    produce,
    unique,
    wait_assignment,
)
from tests.support.helpers import wait_until

PARTITIONS = 6

CLIENTS = {"kafka-python": KafkaPythonConsumer, "aiokafka": AioConsumer, "confluent": ThreadConsumer}


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_group_of_one_client_kind(group_broker, client):
    bs = group_broker.bootstrap
    make = CLIENTS[client]
    topic = create_topic(bs, unique(f"grp-{client}"), PARTITIONS)
    group = unique(f"g-{client}")
    tps = {(topic, p) for p in range(PARTITIONS)}
    first = produce(bs, topic, PARTITIONS, 30)
    a, b = make(bs, group, topic), make(bs, group, topic)
    try:
        asg = wait_assignment(bs, group, 2, tps)
        assert sorted(len(v) for v in asg.values()) == [3, 3]
        wait_until(lambda: len(a.records) + len(b.records) >= 30, timeout=30, what="30 messages consumed")
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 5 for p in range(PARTITIONS)},
                   timeout=15, what="offsets committed at 5")
        assert sorted(a.values() + b.values()) == sorted(first)
        a.stop()  # leaves the group: b takes over every partition
        wait_assignment(bs, group, 1, tps)
        second = produce(bs, topic, PARTITIONS, 12, start=30)
        wait_until(lambda: len([v for v in b.values() if v not in first]) >= 12, timeout=30,
                   what="b consumes the new messages")
        assert sorted(v for v in b.values() if v not in first) == sorted(second)
    finally:
        a.stop()
        b.stop()
    # a fresh member resumes at the committed offsets
    third = produce(bs, topic, PARTITIONS, 6, start=42)
    c = make(bs, group, topic)
    try:
        wait_until(lambda: len(c.records) >= 6, timeout=30, what="the fresh member reads the new messages")
        time.sleep(0.3)
        assert sorted(c.values()) == sorted(third)
    finally:
        c.stop()


def test_mixed_group(group_broker):
    """librdkafka, kafka-python and aiokafka share a group: the common assignor protocol is chosen."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-mixed"), PARTITIONS)
    group = unique("g-mixed")
    tps = {(topic, p) for p in range(PARTITIONS)}
    members = [ThreadConsumer(bs, group, topic, **{"partition.assignment.strategy": "roundrobin"}),
               KafkaPythonConsumer(bs, group, topic),
               AioConsumer(bs, group, topic)]
    try:
        asg = wait_assignment(bs, group, 3, tps)
        assert sorted(len(v) for v in asg.values()) == [2, 2, 2]
        wait_until(lambda: all(len(m.assignment) == 2 for m in members), timeout=20, what="2 partitions each")
        values = produce(bs, topic, PARTITIONS, 36)  # after the group settled: each member gets 12
        wait_until(lambda: sum(len(m.records) for m in members) >= 36, timeout=30, what="36 messages consumed")
        time.sleep(0.3)
        assert sorted(v for m in members for v in m.values()) == sorted(values)
        assert all(m.records for m in members), "every client kind got partitions"
    finally:
        for m in members:
            m.stop()


def test_static_member_rejoins_without_rebalance(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-static"), PARTITIONS)
    group = unique("g-static")
    tps = {(topic, p) for p in range(PARTITIONS)}
    static = {"session.timeout.ms": 30000}
    a = ThreadConsumer(bs, group, topic, **{"group.instance.id": "static-a"}, **static)
    b = ThreadConsumer(bs, group, topic, **{"group.instance.id": "static-b"}, **static)
    try:
        before = wait_assignment(bs, group, 2, tps)
        b_parts = b.assignment
        wait_until(lambda: b.assignment and a.assignment, timeout=15, what="both members assigned")
        b_parts = set(b.assignment)
        a_events = len(a.events)
        b.stop()  # a static member leaves without LeaveGroup: nothing happens until its session expires
        time.sleep(1.0)
        assert len(group_assignment(bs, group)) == 2
        b2 = ThreadConsumer(bs, group, topic, **{"group.instance.id": "static-b"}, **static)
        try:
            wait_until(lambda: b2.assignment, timeout=20, what="the restarted static member gets its partitions")
            assert b2.assignment == b_parts  # same partitions back, from the stored assignment
            time.sleep(1.0)
            assert len(a.events) == a_events, f"the other member saw a rebalance: {a.events[a_events:]}"
            after = group_assignment(bs, group)
            assert sorted(map(sorted, after.values())) == sorted(map(sorted, before.values()))
            assert set(after) != set(before)  # the rejoined member has a new member id
        finally:
            b2.stop()
    finally:
        a.stop()
        b.stop()


def test_cooperative_sticky_rebalances_incrementally(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-coop"), PARTITIONS)
    group = unique("g-coop")
    tps = {(topic, p) for p in range(PARTITIONS)}
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    a = ThreadConsumer(bs, group, topic, **coop)
    b = c = None
    try:
        wait_assignment(bs, group, 1, tps)
        wait_until(lambda: len(a.assignment) == PARTITIONS, timeout=15, what="a owns every partition")
        b = ThreadConsumer(bs, group, topic, **coop)
        wait_assignment(bs, group, 2, tps)
        wait_until(lambda: len(a.assignment) == 3 and len(b.assignment) == 3, timeout=20, what="3 + 3")
        c = ThreadConsumer(bs, group, topic, **coop)
        wait_assignment(bs, group, 3, tps)
        wait_until(lambda: sorted(map(len, (a.assignment, b.assignment, c.assignment))) == [2, 2, 2],
                   timeout=20, what="2 + 2 + 2")
        # incremental: a only ever gave partitions away, never revoked its whole assignment
        revokes = [parts for kind, parts in a.events if kind == "revoke"]
        assert revokes and all(len(parts) < PARTITIONS for parts in revokes), a.events
        assert a.assignment | b.assignment | c.assignment == set(range(PARTITIONS))
    finally:
        for m in (a, b, c):
            if m is not None:
                m.stop()
