"""Moving a group between the classic and the consumer (KIP-848) protocol while it is empty: the
offsets stay and the next member resumes from them; and transactional consume-transform-produce with
a group.protocol=consumer member (TxnOffsetCommit carries its member epoch). Runs against minikafka
and Kafka (--broker=kafka)."""
from __future__ import annotations

import time

from kafka.protocol.admin import ListGroupsRequest

from tests.support.consumer_protocol_helpers import ProtocolConsumer, describe
from tests.support.group_helpers import (
    ThreadConsumer,
    committed_offsets,
    create_topic,
    group_broker,  # noqa: F401  (fixture)
    produce,
    unique,
)
from tests.support.helpers import RawClient, wait_until

PARTITIONS = 3


def group_type(bs: str, group: str) -> str | None:
    with RawClient(bs) as c:
        groups = c.request(ListGroupsRequest(states_filter=[], types_filter=[]), 5).groups
    return next((g.group_type for g in groups if g.group_id == group), None)


def test_empty_group_moves_between_protocols(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-migrate"), PARTITIONS)
    group = unique("cg-migrate")
    first = produce(bs, topic, PARTITIONS, 30)
    classic = ThreadConsumer(bs, group, topic)
    try:
        wait_until(lambda: set(first) <= set(classic.values()), timeout=60, what="classic member consumes 30")
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 10 for p in range(PARTITIONS)},
                   timeout=30, what="committed at 10")
    finally:
        classic.stop()
    assert group_type(bs, group) == "classic"

    # the empty classic group becomes a consumer group; the member starts at the committed offsets
    second = produce(bs, topic, PARTITIONS, 30, start=30)
    modern = ProtocolConsumer(bs, group, [topic], "modern")
    try:
        wait_until(lambda: set(second) <= set(modern.values()), timeout=60, what="consumer member consumes 30")
        time.sleep(0.5)
        assert sorted(modern.values()) == sorted(second)
        assert group_type(bs, group) == "consumer"
        with RawClient(bs) as c:
            assert describe(c, group)[group].error_code == 0
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 20 for p in range(PARTITIONS)},
                   timeout=30, what="committed at 20")
    finally:
        modern.stop()

    # and back: a classic member joins the empty consumer group
    third = produce(bs, topic, PARTITIONS, 30, start=60)
    classic = ThreadConsumer(bs, group, topic)
    try:
        wait_until(lambda: set(third) <= set(classic.values()), timeout=60, what="classic member again")
        time.sleep(0.5)
        assert sorted(classic.values()) == sorted(third)
        assert group_type(bs, group) == "classic"
    finally:
        classic.stop()


def test_transactional_consume_transform_produce(group_broker):
    from confluent_kafka import Producer, TopicPartition

    bs = group_broker.bootstrap
    src = create_topic(bs, unique("cgp-eos-in"), PARTITIONS)
    dst = create_topic(bs, unique("cgp-eos-out"), PARTITIONS)
    group = unique("cg-eos")
    inputs = produce(bs, src, PARTITIONS, 150)
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed"})
    p = Producer({"bootstrap.servers": bs, "transactional.id": unique("txn-cgp"), "linger.ms": 5})
    try:
        c.subscribe([src])
        p.init_transactions(30)
        done = 0
        deadline = time.monotonic() + 90
        while done < len(inputs) and time.monotonic() < deadline:
            msgs = [m for m in c.consume(num_messages=50, timeout=0.5) if not m.error()]
            if not msgs:
                continue
            p.begin_transaction()
            offsets: dict[int, int] = {}
            for m in msgs:
                p.produce(dst, key=m.key(), value=b"T(" + m.value() + b")", partition=m.partition())
                offsets[m.partition()] = m.offset() + 1
            p.send_offsets_to_transaction([TopicPartition(src, q, o) for q, o in offsets.items()],
                                          c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            done += len(msgs)
        assert done == len(inputs)
    finally:
        c.close()
    assert committed_offsets(bs, group, src, PARTITIONS) == {q: 50 for q in range(PARTITIONS)}
    assert sorted(read_committed(bs, dst, len(inputs))) == sorted(b"T(" + v + b")" for v in inputs)


def read_committed(bs: str, topic: str, expected: int) -> list[bytes]:
    """Every committed record of `topic` (waits for `expected`, then a little longer for extras)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": unique("reader"), "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in range(PARTITIONS)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msgs = [m for m in c.consume(num_messages=500, timeout=0.5) if not m.error()]
            out += [m.value() for m in msgs]
            if len(out) >= expected and not msgs:
                break
    finally:
        c.close()
    return out


def test_online_upgrade_of_a_classic_group(group_broker):
    """Two classic members share a topic; a group.protocol=consumer member joins: the group becomes
    a consumer group with the classic members in it (they keep JoinGroup/SyncGroup/Heartbeat), the
    partitions spread over all three without ever being held twice, and back when it leaves."""
    from tests.support.consumer_protocol_helpers import OwnershipLog
    from tests.integration.groups.test_consumer_group_protocol import CommitWatcher, wait_members

    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-upgrade"), 6)
    group = unique("cg-upgrade")
    log = OwnershipLog()
    classic_conf = {"group.protocol": "classic", "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}
    produced = produce(bs, topic, 6, 60)
    a = ProtocolConsumer(bs, group, [topic], "a", log, **classic_conf)
    b = ProtocolConsumer(bs, group, [topic], "b", log, **classic_conf)
    c = None
    watcher = CommitWatcher(bs, group, topic, 6)
    try:
        wait_members([a, b], [3, 3])
        assert group_type(bs, group) == "classic"
        c = ProtocolConsumer(bs, group, [topic], "c", log)
        wait_members([a, b, c], [2, 2, 2], timeout=90)
        assert group_type(bs, group) == "consumer"
        with RawClient(bs) as raw:
            g = describe(raw, group)[group]
        # MemberType: 0 classic, 1 consumer
        assert g.error_code == 0 and sorted(m.member_type for m in g.members) == [0, 0, 1], g
        produced += produce(bs, topic, 6, 60, start=60)
        wait_until(lambda: set(produced) <= set(a.values() + b.values() + c.values()), timeout=60,
                   what="everything consumed by the mixed group")
        c.stop()
        wait_members([a, b], [3, 3], timeout=90)
        assert group_type(bs, group) == "classic"  # only classic members left: downgraded
        produced += produce(bs, topic, 6, 60, start=120)
        wait_until(lambda: set(produced) <= set(a.values() + b.values() + c.values()), timeout=60,
                   what="everything consumed after the consumer member left")
    finally:
        for x in (a, b, c):
            if x is not None:
                x.stop()
        watcher.stop()
    log.assert_never_shared()
    assert not watcher.regressions, watcher.regressions
