"""Transactions as a confluent-kafka client sees them (KIP-98): atomic commit across topics and
partitions, aborted data invisible to read_committed, the LSO holding read_committed consumers at the
first open transaction, and the interleaving of transactional and plain producers. Black-box: runs
against Apache Kafka too (--broker=kafka)."""
from __future__ import annotations

import uuid

import pytest

from tests.support.helpers import RawClient
from tests.support.txn_helpers import (
    consume_to_end,
    create_topics,
    fetch_isolated,
    list_offset_isolated,
    txn_producer,
)

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def uid() -> str:
    return uuid.uuid4().hex[:8]


def values(got: dict[int, list[tuple[int, bytes]]]) -> list[bytes]:
    return [v for p in sorted(got) for _o, v in got[p]]


def test_commit_is_atomic_across_topics_and_partitions(shared_broker):
    b = shared_broker.bootstrap
    topics = {f"txn-multi-{i}-{uid()}": 3 for i in range(3)}
    create_topics(b, topics)
    p = txn_producer(b, f"multi-{uid()}")
    p.begin_transaction()
    sent = {}
    for t in topics:
        for part in range(3):
            sent[(t, part)] = [f"{t}/{part}/{i}".encode() for i in range(10)]
            for v in sent[(t, part)]:
                p.produce(t, value=v, partition=part)
    p.flush()
    for t in topics:  # nothing visible before the commit
        assert values(consume_to_end(b, t, [0, 1, 2])) == []
    p.commit_transaction(30)
    for t in topics:
        got = consume_to_end(b, t, [0, 1, 2])
        for part in range(3):
            assert [v for _o, v in got[part]] == sent[(t, part)]  # all of it, in order
        uncommitted = consume_to_end(b, t, [0, 1, 2], isolation="read_uncommitted")
        assert values(uncommitted) == values(got)


def test_aborted_records_are_invisible_to_read_committed(shared_broker):
    b = shared_broker.bootstrap
    topic = f"txn-abort-{uid()}"
    create_topics(b, {topic: 3})
    p = txn_producer(b, f"abort-{uid()}")
    committed, aborted = [], []
    for round_ in range(6):  # alternate aborted and committed transactions on the same partitions
        p.begin_transaction()
        batch = [f"r{round_}-{i}".encode() for i in range(9)]
        for i, v in enumerate(batch):
            p.produce(topic, value=v, partition=i % 3)
        if round_ % 2:
            p.commit_transaction(30)
            committed += batch
        else:
            p.flush()
            p.abort_transaction(30)
            aborted += batch
    rc = values(consume_to_end(b, topic, [0, 1, 2]))
    assert sorted(rc) == sorted(committed)
    ru = values(consume_to_end(b, topic, [0, 1, 2], isolation="read_uncommitted"))
    assert sorted(ru) == sorted(committed + aborted)
    with RawClient(b) as c:  # after the last marker nothing is open: LSO == high watermark
        for part in range(3):
            assert list_offset_isolated(c, topic, part, READ_COMMITTED) == list_offset_isolated(
                c, topic, part, READ_UNCOMMITTED)


def test_open_transaction_pins_the_lso(shared_broker):
    b = shared_broker.bootstrap
    topic = f"txn-lso-{uid()}"
    create_topics(b, {topic: 1})
    plain = txn_producer(b, f"lso-plain-{uid()}")
    plain.begin_transaction()
    for i in range(3):
        plain.produce(topic, value=b"before-%d" % i, partition=0)
    plain.commit_transaction(30)
    p = txn_producer(b, f"lso-open-{uid()}")
    p.begin_transaction()
    p.produce(topic, value=b"open-0", partition=0)
    p.produce(topic, value=b"open-1", partition=0)
    p.flush()
    plain.begin_transaction()
    plain.produce(topic, value=b"after", partition=0)
    plain.commit_transaction(30)  # committed, but after the open transaction's first offset
    uncommitted = dict((v, o) for o, v in consume_to_end(b, topic, [0], isolation="read_uncommitted")[0])
    first_open = uncommitted[b"open-0"]
    with RawClient(b) as c:
        hw = list_offset_isolated(c, topic, 0, READ_UNCOMMITTED)
        assert hw > first_open + 2
        assert list_offset_isolated(c, topic, 0, READ_COMMITTED) == first_open
        pd = fetch_isolated(c, topic, 0, 0, isolation=READ_COMMITTED)
        assert pd.high_watermark == hw and pd.last_stable_offset == first_open
    assert [v for _o, v in consume_to_end(b, topic, [0])[0]] == [b"before-0", b"before-1", b"before-2"]
    p.commit_transaction(30)
    got = [v for _o, v in consume_to_end(b, topic, [0])[0]]
    assert got == [b"before-0", b"before-1", b"before-2", b"open-0", b"open-1", b"after"]
    with RawClient(b) as c:
        assert list_offset_isolated(c, topic, 0, READ_COMMITTED) == list_offset_isolated(c, topic, 0, READ_UNCOMMITTED)


@pytest.mark.parametrize("first_outcome", ["commit", "abort"])
def test_interleaved_transactional_and_plain_producers(shared_broker, first_outcome):
    """KIP-98 interleaving: T1 opens first, T2 and a plain producer write after it on the same partition,
    T2 commits first. read_committed sees nothing past T1's first offset until T1 is decided, then
    the log in offset order without T1's records if T1 aborted."""
    from confluent_kafka import Producer

    b = shared_broker.bootstrap
    topic = f"txn-interleave-{uid()}"
    create_topics(b, {topic: 1})
    t1 = txn_producer(b, f"il-1-{uid()}")
    t2 = txn_producer(b, f"il-2-{uid()}")
    plain = Producer({"bootstrap.servers": b, "linger.ms": 0})
    t1.begin_transaction()
    t2.begin_transaction()
    t1.produce(topic, value=b"t1-a", partition=0)
    t1.flush()
    t2.produce(topic, value=b"t2-a", partition=0)
    t2.flush()
    plain.produce(topic, value=b"plain-a", partition=0)
    plain.flush()
    t1.produce(topic, value=b"t1-b", partition=0)
    t1.flush()
    t2.commit_transaction(30)
    assert consume_to_end(b, topic, [0])[0] == []  # T2 committed, but T1 opened before it
    if first_outcome == "commit":
        t1.commit_transaction(30)
        expected = [b"t1-a", b"t2-a", b"plain-a", b"t1-b"]
    else:
        t1.abort_transaction(30)
        expected = [b"t2-a", b"plain-a"]
    assert [v for _o, v in consume_to_end(b, topic, [0])[0]] == expected
    assert len(consume_to_end(b, topic, [0], isolation="read_uncommitted")[0]) == 4
