"""A topic's `compression.type` decides the codec its batches are stored in (Kafka's LogValidator recompresses
client batches whose codec differs), at the topic's `compression.<codec>.level`; `producer` keeps the
producer's codec. Checked on the fetched batches' attribute bits and records, with librdkafka producers and
consumers (snappy, lz4, zstd, gzip from librdkafka; the Java client in test_java_client.py), idempotent
sequences and transactions kept. Config keys Kafka 4.3 no longer knows are refused as it refuses them."""
from __future__ import annotations

import struct
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.support.helpers import RawClient, decode_records, fetch_once

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def batches(bootstrap: str, topic: str) -> list[tuple[int, int, int, int]]:
    """(codec, producer id, base sequence, record count) of every stored batch of partition 0."""
    with RawClient(bootstrap) as c:
        data = bytes(fetch_once(c, topic, 0, 0, max_bytes=8 << 20).records or b"")
    out, pos = [], 0
    while pos + 61 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        attributes, = struct.unpack_from(">h", data, pos + 21)
        producer_id, = struct.unpack_from(">q", data, pos + 43)
        base_sequence, count = struct.unpack_from(">ii", data, pos + 53)
        if not attributes & 0x20:  # not a control batch
            out.append((attributes & 0x07, producer_id, base_sequence, count))
        pos += length + 12
    return out


def values(bootstrap: str, topic: str) -> list[bytes]:
    with RawClient(bootstrap) as c:
        return [v for _o, _k, v in decode_records(bytes(fetch_once(c, topic, 0, 0, max_bytes=8 << 20).records or b""))]


def create(bootstrap: str, config: dict[str, str]) -> str:
    topic = f"tc-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until the result is in
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    return topic


@pytest.mark.parametrize("topic_codec", sorted(CODECS))
@pytest.mark.parametrize("producer_codec", ["none", "lz4", "gzip"])
def test_stored_batches_are_in_the_topic_codec(shared_broker, topic_codec, producer_codec):
    b = shared_broker.bootstrap
    topic = create(b, {"compression.type": topic_codec})
    p = Producer({"bootstrap.servers": b, "compression.type": producer_codec, "linger.ms": 50,
                  "enable.idempotence": True})
    expected = [f"{topic_codec}-{i}-".encode() * 20 for i in range(200)]
    for v in expected:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0
    stored = batches(b, topic)
    assert stored and {codec for codec, *_ in stored} == {CODECS[topic_codec]}, stored
    # the producer's id and sequences survive the re-coding: the batches still chain
    seqs = [(seq, n) for _c, pid, seq, n in stored]
    assert all(pid >= 0 for _c, pid, _s, _n in stored)
    assert [s for s, _n in seqs] == [sum(n for _s, n in seqs[:i]) for i in range(len(seqs))]
    assert values(b, topic) == expected
    c = Consumer({"bootstrap.servers": b, "group.id": topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    while len(got) < len(expected):
        msgs = c.consume(len(expected) - len(got), 10)
        assert msgs, f"consumer stopped at {len(got)}"
        got += [m.value() for m in msgs if m.error() is None]
    c.close()
    assert got == expected


def test_producer_keeps_the_producers_codec_and_levels_are_topic_configs(shared_broker):
    b = shared_broker.bootstrap
    topic = create(b, {"compression.type": "producer", "compression.gzip.level": "1", "compression.lz4.level": "12",
                       "compression.zstd.level": "-5"})
    for codec in ("lz4", "zstd", "none"):
        p = Producer({"bootstrap.servers": b, "compression.type": codec, "linger.ms": 20})
        for i in range(50):
            p.produce(topic, f"{codec}-{i}".encode() * 10, partition=0)
        assert p.flush(30) == 0
    codecs = [codec for codec, *_ in batches(b, topic)]
    assert [c for i, c in enumerate(codecs) if i == 0 or codecs[i - 1] != c] == [3, 4, 0], codecs
    admin = AdminClient({"bootstrap.servers": b})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([res])[res].result(30)
    assert {k: described[k].value for k in ("compression.gzip.level", "compression.lz4.level",
                                              "compression.zstd.level")} == {
        "compression.gzip.level": "1", "compression.lz4.level": "12", "compression.zstd.level": "-5"}


def test_a_topic_codec_changed_later_applies_to_new_batches(shared_broker):
    b = shared_broker.bootstrap
    topic = create(b, {"compression.type": "zstd"})
    p = Producer({"bootstrap.servers": b, "compression.type": "none", "linger.ms": 20})
    p.produce(topic, b"first" * 100, partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": b})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("compression.type", "gzip", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    import time
    deadline = time.monotonic() + 15
    while True:  # Kafka applies topic config changes asynchronously
        p.produce(topic, b"later" * 100, partition=0)
        assert p.flush(30) == 0
        if batches(b, topic)[-1][0] == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    codecs = [codec for codec, *_ in batches(b, topic)]
    assert codecs[0] == 4 and codecs[-1] == 1


def test_transactional_batches_are_recoded_and_stay_atomic(shared_broker):
    b = shared_broker.bootstrap
    topic = create(b, {"compression.type": "lz4"})
    p = Producer({"bootstrap.servers": b, "transactional.id": f"{topic}-tx", "compression.type": "gzip",
                  "linger.ms": 20})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(100):
        p.produce(topic, f"c-{i}".encode(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"a-{i}".encode(), partition=0)
    p.abort_transaction(30)
    assert {codec for codec, *_ in batches(b, topic)} == {3}
    c = Consumer({"bootstrap.servers": b, "group.id": topic, "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(20):
        got += [m.value() for m in c.consume(100 - len(got), 1) if m.error() is None]
        if len(got) >= 100:
            break
    c.close()
    assert got == [f"c-{i}".encode() for i in range(100)]


@pytest.mark.parametrize("config, reason", [
    ({"message.timestamp.difference.max.ms": "1000"}, "message.timestamp.difference.max.ms"),  # gone in Kafka 4.0
    ({"compression.type": "brotli"}, "compression.type"),
    ({"compression.gzip.level": "10"}, "compression.gzip.level"),
    ({"compression.lz4.level": "0"}, "compression.lz4.level"),
    ({"compression.zstd.level": "23"}, "compression.zstd.level"),
])
def test_config_keys_kafka_refuses(shared_broker, config, reason):
    topic = f"tc-bad-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    assert exc.value.args[0].name() == "INVALID_CONFIG"
    assert reason in exc.value.args[0].str()
