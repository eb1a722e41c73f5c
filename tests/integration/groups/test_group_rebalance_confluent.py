"""Three confluent-kafka consumers in one group over a 6-partition topic: each partition assigned once,
a member leaves and its partitions move, a member killed -9 is evicted after its session timeout, and
committed offsets resume exactly where the members stopped. Runs against minikafka and Kafka."""
from __future__ import annotations

import time

import pytest

from tests.support.group_helpers import (
    SubprocessConsumer,
    ThreadConsumer,
    committed_offsets,
    create_topic,
    group_broker,  # noqa: F401  (fixture)
    produce,
    unique,
    wait_assignment,
)
from tests.support.helpers import wait_until

PARTITIONS = 6


@pytest.mark.serial  # a latency bound: not beside another xdist worker's load
def test_three_consumers_leave_kill_and_resume(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-confluent"), PARTITIONS)
    group = unique("g-confluent")
    all_tps = {(topic, p) for p in range(PARTITIONS)}
    first = produce(bs, topic, PARTITIONS, 60)

    a = ThreadConsumer(bs, group, topic)
    b = ThreadConsumer(bs, group, topic)
    c = SubprocessConsumer(bs, group, topic)
    try:
        asg = wait_assignment(bs, group, 3, all_tps)
        assert sorted(len(tps) for tps in asg.values()) == [2, 2, 2]
        wait_until(lambda: len(a.records) + len(b.records) + len(c.records) >= 60, timeout=30,
                   what="the first 60 messages consumed")
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 10 for p in range(PARTITIONS)},
                   timeout=15, what="every partition committed at 10")
        assert sorted(a.values() + b.values() + c.values()) == sorted(first)  # each message once

        a.stop()  # close() sends LeaveGroup: its partitions move to b and c at once
        t0 = time.monotonic()
        wait_assignment(bs, group, 2, all_tps, timeout=15)
        assert time.monotonic() - t0 < 5.5, "leave should rebalance without waiting for a session timeout"

        c.kill()  # no LeaveGroup: the coordinator evicts it when its 6 s session expires
        t0 = time.monotonic()
        asg = wait_assignment(bs, group, 1, all_tps, timeout=30)
        assert time.monotonic() - t0 > 3.0, "a killed member is only evicted by its session timeout"
        assert list(asg.values()) == [all_tps]

        second = produce(bs, topic, PARTITIONS, 60, start=60)
        wait_until(lambda: len([v for v in b.values() if v not in first]) >= 60, timeout=30,
                   what="b consumes the second 60 messages")
        got = [v for v in b.values() if v not in first]
        assert sorted(got) == sorted(second)  # resumed exactly at the committed offsets: no loss, no dup
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 20 for p in range(PARTITIONS)},
                   timeout=15, what="every partition committed at 20")
    finally:
        for consumer in (a, b):
            consumer.stop()
        if c.proc.poll() is None:
            c.kill()

    # a new member of the same group starts from the committed offsets: nothing before 20 again
    third = produce(bs, topic, PARTITIONS, 12, start=120)
    d = ThreadConsumer(bs, group, topic)
    try:
        wait_until(lambda: len(d.records) >= 12, timeout=30, what="d consumes the 12 new messages")
        time.sleep(0.5)
        assert sorted(d.values()) == sorted(third)
        assert all(o >= 20 for _, o, _ in d.records)
    finally:
        d.stop()
