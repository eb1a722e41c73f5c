"""Compaction of a user topic with cleanup.policy=compact, end to end: a confluent-kafka producer
writes several versions of each key, the broker's log cleaner (fast backoff, tiny segments,
min.cleanable.dirty.ratio=0.01) keeps only the latest, drops tombstones after delete.retention.ms,
and consumers read a valid, offset-ordered log throughout."""
from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.support.group_helpers import create_topic, unique
from tests.support.helpers import confluent_watermarks, wait_until

KEYS = 20
ROUNDS = 10


def _produce(bs: str, topic: str, items: list[tuple[bytes, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 5})
    for k, v in items:
        p.produce(topic, key=k, value=v)
        p.poll(0)
    assert p.flush(30) == 0


def _read_all(bs: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    low, high = confluent_watermarks(bs, topic, 0)
    if high == low:
        return []
    msgs = []

    c = Consumer({"bootstrap.servers": bs, "group.id": unique("reader"), "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return msgs
                    raise AssertionError(str(m.error()))
                msgs.append((m.offset(), m.key(), m.value()))
        raise AssertionError("no EOF while reading the compacted topic")
    finally:
        c.close()


def test_compacted_topic_keeps_latest_value_per_key(broker_factory):
    broker = broker_factory({"log.cleaner.backoff.ms": "200"})
    bs = broker.bootstrap
    topic = create_topic(bs, unique("compacted"), 1, {
        "cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "2000"})
    produced = [(b"key-%02d" % k, b"value-%02d-round-%02d" % (k, r)) for r in range(ROUNDS) for k in range(KEYS)]
    _produce(bs, topic, produced)
    latest = {k: v for k, v in produced}
    # roll the segments holding the last round: more data for other keys
    filler = [(b"filler-%02d" % (i % 5), b"x" * 100) for i in range(40)]
    _produce(bs, topic, filler)
    total = len(produced) + len(filler)

    def compacted():
        recs = _read_all(bs, topic)
        return recs if len(recs) < total // 2 else None
    recs = wait_until(compacted, timeout=30, interval=0.5, what="the log cleaner to compact the topic")
    offsets = [o for o, _, _ in recs]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    seen: dict[bytes, bytes] = {}
    for _o, k, v in recs:
        seen[k] = v
    assert {k: seen[k] for k in latest} == latest  # the latest value of every key survived
    assert confluent_watermarks(bs, topic, 0) == (0, total)  # compaction moves neither watermark
    older = [(k, v) for _o, k, v in recs if k in latest and v != latest[k]]
    assert len(older) <= KEYS, older  # at most what sits in the active segment

    # a tombstone removes its key once delete.retention.ms has passed
    _produce(bs, topic, [(b"key-00", None)] + [(b"filler-%02d" % (i % 5), b"y" * 100) for i in range(40)])
    time.sleep(2.5)
    _produce(bs, topic, [(b"filler-%02d" % (i % 5), b"z" * 100) for i in range(40)])

    def key_gone():
        recs = _read_all(bs, topic)
        return recs if all(k != b"key-00" for _o, k, _v in recs) else None
    recs = wait_until(key_gone, timeout=30, interval=0.5, what="key-00 and its tombstone to be cleaned away")
    assert {k for _o, k, _v in recs} >= set(latest) - {b"key-00"}
    assert not list(broker.data_dir.glob(f"{topic}-0/*.cleaned"))
    assert (broker.data_dir / "cleaner-offset-checkpoint").exists()
    assert "Traceback" not in broker.log_text() and "cleaned " in broker.log_text()
