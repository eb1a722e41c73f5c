"""Produce/consume round trips through stock clients (confluent-kafka, kafka-python, aiokafka).

Every client creates its own topics (through its own admin API where it has one), produces keyed
records with headers and explicit CreateTime timestamps with each compression codec, and reads them
back with assign(). Per partition we check: offsets contiguous from 0, order, exact keys / values /
headers / timestamps, no duplicates and an exact count (high watermark == records sent).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest

from tests.support.helpers import (
    RawClient,
    confluent_consume,
    confluent_watermarks,
    fetch_once,
    wait_broker_connections_closed,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {codec: i for i, codec in enumerate(CODECS)}  # record-batch attribute bits 0-2
CLIENTS = ["confluent", "kafka-python", "aiokafka"]
PARTITIONS = 4
PER_PARTITION = 500          # 4 * 500 * 5 codecs = 10,000 records per client
TIMEOUT = 60


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    create_time: bool


def make_records(tag: str, partitions: int, per_partition: int) -> list[Rec]:
    """Distinct keys/values/headers per record; timestamps strictly increasing, not the append time."""
    base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago: clearly CreateTime, well inside retention
    out = []
    for i in range(per_partition):
        for p in range(partitions):
            seq = f"{tag}-p{p}-{i:06d}"
            value = (f"value {seq} " + "lorem ipsum dolor sit amet " * (1 + i % 7)).encode()
            if i % 50 == 0:
                value += bytes(range(256))  # binary payload now and then
            headers = (("seq", seq.encode()), ("part", str(p).encode()), ("dup", b"first"), ("dup", b"second"))
            if i % 3 == 0:
                headers += (("empty", b""),)
            out.append(Rec(p, f"key-{seq}".encode(), value, headers, base_ts + p * 1_000_000 + i * 7))
    return out


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


# ---------------------------------------------------------------------------------------------
# Admin: create topics with each client's own admin API
# ---------------------------------------------------------------------------------------------

def create_topics(client: str, bootstrap: str, names: list[str], partitions: int) -> None:
    if client == "confluent":
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=10)
        for f in futures.values():
            f.result(timeout=TIMEOUT)
    elif client == "kafka-python":
        from kafka.admin import KafkaAdminClient, NewTopic
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic(n, partitions, 1) for n in names])
        finally:
            admin.close()
    elif client == "aiokafka":
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def run():
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                resp = await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
                for entry in resp.topic_errors:
                    assert entry[1] == 0, entry
            finally:
                await admin.close()
        asyncio.run(run())
    else:
        raise AssertionError(client)


# ---------------------------------------------------------------------------------------------
# Producers
# ---------------------------------------------------------------------------------------------

def produce(client: str, bootstrap: str, topic: str, records: list[Rec], codec: str) -> None:
    if client == "confluent":
        from confluent_kafka import Producer
        errors = []
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                             "enable.idempotence": True})
        for r in records:
            while True:
                try:
                    producer.produce(topic, r.value, r.key, partition=r.partition, timestamp=r.timestamp,
                                     headers=list(r.headers),
                                     on_delivery=lambda err, msg: err and errors.append(err))
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(TIMEOUT) == 0
        assert not errors, errors[:5]
    elif client == "kafka-python":
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                                 compression_type=None if codec == "none" else codec)
        try:
            futures = [producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                     timestamp_ms=r.timestamp, headers=list(r.headers)) for r in records]
            producer.flush(TIMEOUT)
            for f in futures:
                f.get(timeout=TIMEOUT)
        finally:
            producer.close(timeout=10)
    elif client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        async def run():
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all",
                                        compression_type=None if codec == "none" else codec)
            await producer.start()
            try:
                futures = [await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                               timestamp_ms=r.timestamp, headers=list(r.headers))
                           for r in records]
                await producer.flush()
                for f in futures:
                    await asyncio.wait_for(f, TIMEOUT)
            finally:
                await producer.stop()
        asyncio.run(run())
    else:
        raise AssertionError(client)


# ---------------------------------------------------------------------------------------------
# Consumers (assign + from the beginning; stop once every partition has its expected count)
# ---------------------------------------------------------------------------------------------

def _norm_headers(headers) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, bytes(v) if v is not None else None) for k, v in (headers or ()))


def consume(client: str, bootstrap: str, topic: str, expected: dict[int, int]) -> dict[int, list[Got]]:
    if client == "confluent":
        from confluent_kafka import TIMESTAMP_CREATE_TIME
        raw = confluent_consume(bootstrap, topic, expected, timeout=TIMEOUT)
        out = {}
        for p, msgs in raw.items():
            out[p] = []
            for m in msgs:
                ts_type, ts = m.timestamp()
                out[p].append(Got(p, m.offset(), m.key(), m.value(), _norm_headers(m.headers()), ts,
                                  ts_type == TIMESTAMP_CREATE_TIME))
        return out
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest")
        out = {p: [] for p in expected}
        try:
            tps = [TopicPartition(topic, p) for p in expected]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + TIMEOUT
            while any(len(out[p]) < n for p, n in expected.items()):
                assert time.monotonic() < deadline, {p: len(v) for p, v in out.items()}
                for tp, msgs in consumer.poll(timeout_ms=500, max_records=5000).items():
                    for m in msgs:
                        out[tp.partition].append(Got(tp.partition, m.offset, m.key, m.value,
                                                     _norm_headers(m.headers), m.timestamp,
                                                     m.timestamp_type == 0))
        finally:
            consumer.close()
        return out
    if client == "aiokafka":
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run():
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest")
            await consumer.start()
            out = {p: [] for p in expected}
            try:
                tps = [TopicPartition(topic, p) for p in expected]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                deadline = time.monotonic() + TIMEOUT
                while any(len(out[p]) < n for p, n in expected.items()):
                    assert time.monotonic() < deadline, {p: len(v) for p, v in out.items()}
                    batches = await consumer.getmany(timeout_ms=500, max_records=5000)
                    for tp, msgs in batches.items():
                        for m in msgs:
                            out[tp.partition].append(Got(tp.partition, m.offset, m.key, m.value,
                                                         _norm_headers(m.headers), m.timestamp,
                                                         m.timestamp_type == 0))
            finally:
                await consumer.stop()
            return out
        return asyncio.run(run())
    raise AssertionError(client)


# ---------------------------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------------------------

def stored_codecs(bootstrap: str, topic: str, partition: int) -> set[int]:
    """Compression codec ids of the batches at the head of a partition, as the broker serves them."""
    with RawClient(bootstrap) as client:
        data = bytes(fetch_once(client, topic, partition, 0, max_bytes=256 * 1024).records or b"")
    codecs, pos = set(), 0
    while pos + 61 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        if pos + 12 + length > len(data):
            break
        assert data[pos + 16] == 2, "magic"
        codecs.add(int.from_bytes(data[pos + 21:pos + 23], "big") & 0x7)
        pos += 12 + length
    assert codecs, "no complete batch fetched"
    return codecs


def verify(bootstrap: str, topic: str, sent: list[Rec], got: dict[int, list[Got]], codec: str) -> None:
    by_partition: dict[int, list[Rec]] = {}
    for r in sent:
        by_partition.setdefault(r.partition, []).append(r)
    assert sorted(got) == sorted(by_partition)
    for p, expected in by_partition.items():
        received = got[p]
        assert len(received) == len(expected), f"partition {p}: {len(received)} received, {len(expected)} sent"
        offsets = [g.offset for g in received]
        assert offsets == list(range(len(expected))), f"partition {p}: offsets not contiguous from 0"
        for i, (want, have) in enumerate(zip(expected, received)):
            assert have.key == want.key, f"p{p} #{i}: key {have.key!r} != {want.key!r}"
            assert have.value == want.value, f"p{p} #{i}: value mismatch"
            assert have.headers == want.headers, f"p{p} #{i}: headers {have.headers} != {want.headers}"
            assert have.timestamp == want.timestamp, f"p{p} #{i}: timestamp {have.timestamp} != {want.timestamp}"
            assert have.create_time, f"p{p} #{i}: timestamp type is not CreateTime"
        # Exact count, no duplicates beyond what we consumed: the log ends where our records end.
        low, high = confluent_watermarks(bootstrap, topic, p)
        assert (low, high) == (0, len(expected)), f"partition {p}: watermarks {(low, high)}"
        # The producer really compressed, and the broker kept the batches as they came. (librdkafka only
        # uses lz4 when the broker's ApiVersions lists FindCoordinator: its "LZ4" feature flag is keyed
        # on that API, so a broker without FindCoordinator silently gets uncompressed batches.)
        assert stored_codecs(bootstrap, topic, p) == {CODEC_IDS[codec]}, f"partition {p}: stored codec"


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_roundtrip(shared_broker, client, codec):
    """2,000 records per codec, 10,000 per client over the five codecs, read back by the same client."""
    bootstrap = shared_broker.bootstrap
    topic = f"rt-{client}-{codec}"
    create_topics(client, bootstrap, [topic], PARTITIONS)
    records = make_records(f"{client}-{codec}", PARTITIONS, PER_PARTITION)
    assert len(records) * len(CODECS) >= 10_000
    produce(client, bootstrap, topic, records, codec)
    got = consume(client, bootstrap, topic, {p: PER_PARTITION for p in range(PARTITIONS)})
    verify(bootstrap, topic, records, got, codec)


@pytest.mark.parametrize("producer,consumer", [("confluent", "kafka-python"), ("kafka-python", "aiokafka"),
                                               ("aiokafka", "confluent")])
@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_cross_client(shared_broker, producer, consumer, codec):
    bootstrap = shared_broker.bootstrap
    topic = f"xc-{producer}-to-{consumer}-{codec}"
    create_topics("kafka-python", bootstrap, [topic], 3)
    records = make_records(f"x-{producer}-{codec}", 3, 200)
    produce(producer, bootstrap, topic, records, codec)
    got = consume(consumer, bootstrap, topic, {p: 200 for p in range(3)})
    verify(bootstrap, topic, records, got, codec)
