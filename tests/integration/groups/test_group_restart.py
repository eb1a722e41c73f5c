"""Group state across broker restarts (SIGTERM and kill -9): committed offsets, members and
generations are reloaded from __consumer_offsets; running clients rejoin and resume."""
from __future__ import annotations

import time

import pytest

from tests.support.group_helpers import (
    FAST_GROUPS,
    RawMember,
    ThreadConsumer,
    committed_offsets,
    create_topic,
    describe_group,
    produce,
    unique,
)
from tests.support.helpers import wait_until

PARTITIONS = 3


@pytest.mark.parametrize("how", ["sigterm", "kill"])
def test_offsets_and_generations_survive_restart(broker_factory, how):
    broker = broker_factory(FAST_GROUPS)
    bs = broker.bootstrap
    topic = create_topic(bs, unique("grp-restart"), PARTITIONS)
    first = produce(bs, topic, PARTITIONS, 30)

    # a raw member holds generation 1 of its own group, with an assignment and committed offsets
    raw = RawMember(bs, unique("g-raw"), topic)
    raw.find_coordinator()
    assert raw.join().error_code == 0 and raw.generation == 1
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
    assignment = ConsumerProtocolAssignment(version=0, assigned_partitions=[(topic, [0, 1, 2])],
                                            user_data=b"").encode(version=0)
    assert raw.sync({raw.member_id: assignment}).error_code == 0
    assert raw.commit({0: 7, 1: 8}) == {0: 0, 1: 0}
    raw.close()

    # a confluent consumer group consumes everything and commits
    group = unique("g-restart")
    consumer = ThreadConsumer(bs, group, topic)
    try:
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 10 for p in range(PARTITIONS)},
                   timeout=30, what="offsets committed at 10")

        if how == "sigterm":
            broker.stop()
        else:
            broker.kill()
        broker.start()

        # the raw member's generation and membership survived: its heartbeat and commit are accepted
        again = RawMember(bs, raw.group, topic)
        again.member_id, again.generation = raw.member_id, raw.generation
        wait_until(lambda: again.heartbeat() == 0, timeout=15, interval=0.1, what="heartbeat after restart")
        assert again.fetch([0, 1, 2]) == {0: (7, 0), 1: (8, 0), 2: (-1, 0)}
        assert again.commit({2: 9}) == {2: 0}
        assert again.heartbeat(generation=raw.generation + 1) == 22  # ILLEGAL_GENERATION: still generation 1
        d = describe_group(bs, raw.group)
        assert str(d.state).endswith("STABLE") and [m.member_id for m in d.members] == [raw.member_id]
        assert {tp.partition for tp in d.members[0].assignment.topic_partitions} == {0, 1, 2}
        again.close()

        # the running client reconnects, keeps its group and resumes after its committed offsets
        second = produce(bs, topic, PARTITIONS, 30, start=30)
        wait_until(lambda: sorted(set(consumer.values())) == sorted(first + second), timeout=60,
                   what="the consumer reads the messages produced after the restart")
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 20 for p in range(PARTITIONS)},
                   timeout=30, what="offsets committed at 20")
    finally:
        consumer.stop()
    assert "Traceback" not in broker.log_text()

    # a new member of the group starts exactly at the committed offsets
    third = produce(bs, topic, PARTITIONS, 6, start=60)
    fresh = ThreadConsumer(bs, group, topic)
    try:
        wait_until(lambda: len(fresh.records) >= 6, timeout=30, what="the fresh member reads 6 new messages")
        time.sleep(0.3)
        assert sorted(fresh.values()) == sorted(third)
    finally:
        fresh.stop()
