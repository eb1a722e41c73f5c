"""ListOffsets: earliest / latest, offsets by timestamp, max timestamp (-3), read_committed latest.

Records carry known CreateTime timestamps (some out of order, some inside a gzip batch), so the
expected answers follow from Kafka's definitions:
- by timestamp T: the earliest offset whose record timestamp >= T, with that record's timestamp;
  nothing matches -> offset -1, timestamp -1;
- MAX_TIMESTAMP (-3, v7+): the offset and timestamp of the record with the largest timestamp;
- LATEST with isolation_level=1 is the LSO, which equals the high watermark without transactions.
"""
from __future__ import annotations

import time

import kafka.errors as ke
import pytest
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from tests.support.helpers import RawClient, confluent_consumer, produce_raw, wait_broker_connections_closed

Topic = ListOffsetsRequest.ListOffsetsTopic
Partition = Topic.ListOffsetsPartition

T0 = int(time.time() * 1000) - 600_000  # ten minutes ago, well inside retention
# (relative timestamp, compression) per batch; offsets run 0..8 across them in this order.
BATCHES = [([1000, 3000, 2000, 4000], 0),   # offsets 0-3, out of order inside the batch
           ([5000, 9000], 1),               # offsets 4-5, gzip: the lookup has to look inside it
           ([6000, 7000, 8000], 0)]         # offsets 6-8, all below the max seen before them
ALL_TS = [T0 + rel for rels, _ in BATCHES for rel in rels]
TOPIC = "lo-times"
EMPTY = "lo-empty"
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def expected_for(target: int) -> tuple[int, int]:
    for offset, ts in enumerate(ALL_TS):
        if ts >= target:
            return offset, ts
    return -1, -1


# target (relative to T0) -> must match expected_for(); these are the interesting points.
TARGETS = [-10**6, 0, 1000, 1001, 1500, 2500, 3000, 3500, 4000, 4500, 5000, 5500, 6500, 8500, 9000, 9001, 10**6]


def _batch(rel_timestamps: list[int], compression: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20)
    for rel in rel_timestamps:
        assert builder.append(timestamp=T0 + rel, key=b"k%d" % rel, value=b"v%d" % rel, headers=[]) is not None
    builder.close()
    return bytes(builder.buffer())



@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


@pytest.fixture(scope="module")
def topics(shared_broker):
    from confluent_kafka.admin import AdminClient, NewTopic
    bootstrap = shared_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(EMPTY, 1, 1)]).values():
        f.result(timeout=30)
    with RawClient(bootstrap) as client:
        base = 0
        for rels, compression in BATCHES:
            p = produce_raw(client, TOPIC, _batch(rels, compression))
            assert p.error_code == 0 and p.base_offset == base, p
            base += len(rels)
    return bootstrap


def list_offsets(bootstrap: str, topic: str, timestamp: int, version: int, partition: int = 0,
                 isolation_level: int = 0):
    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        Topic(name=topic, partitions=[Partition(partition_index=partition, current_leader_epoch=-1,
                                                timestamp=timestamp)])])
    with RawClient(bootstrap) as client:
        resp = client.request(req, version, ListOffsetsResponse)
    (t,) = resp.topics
    (p,) = t.partitions
    assert (t.name, p.partition_index) == (topic, partition)
    return p


@pytest.mark.parametrize("version", range(1, 11))
def test_earliest_latest_raw(topics, version):
    n = len(ALL_TS)
    p = list_offsets(topics, TOPIC, EARLIEST, version)
    assert (p.error_code, p.offset) == (0, 0)
    p = list_offsets(topics, TOPIC, LATEST, version)
    assert (p.error_code, p.offset) == (0, n)
    for ts in (EARLIEST, LATEST):
        p = list_offsets(topics, EMPTY, ts, version)
        assert (p.error_code, p.offset) == (0, 0)


def test_earliest_latest_clients(topics):
    from kafka import KafkaConsumer, TopicPartition as KTP
    from confluent_kafka import TopicPartition
    n = len(ALL_TS)
    consumer = confluent_consumer(topics)
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False) == (0, n)
        assert consumer.get_watermark_offsets(TopicPartition(EMPTY, 0), timeout=10, cached=False) == (0, 0)
    finally:
        consumer.close()
    kc = KafkaConsumer(bootstrap_servers=topics, group_id=None, enable_auto_commit=False)
    try:
        tps = [KTP(TOPIC, 0), KTP(EMPTY, 0)]
        assert kc.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert kc.end_offsets(tps) == {tps[0]: n, tps[1]: 0}
    finally:
        kc.close()


@pytest.mark.parametrize("version", [1, 4, 7, 10])
@pytest.mark.parametrize("rel", TARGETS)
def test_offset_for_timestamp_raw(topics, version, rel):
    p = list_offsets(topics, TOPIC, T0 + rel, version)
    assert p.error_code == 0
    assert (p.offset, p.timestamp) == expected_for(T0 + rel), f"target T0{rel:+d}"


def test_offset_for_timestamp_empty_partition(topics):
    p = list_offsets(topics, EMPTY, T0, 7)
    assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)


def test_offsets_for_times_confluent(topics):
    from confluent_kafka import TopicPartition
    consumer = confluent_consumer(topics)
    try:
        for rel in TARGETS:
            if T0 + rel < 0:
                continue
            (tp,) = consumer.offsets_for_times([TopicPartition(TOPIC, 0, T0 + rel)], timeout=10)
            assert tp.error is None
            # librdkafka maps "no such record" (-1) to OFFSET_END (-1)
            assert tp.offset == expected_for(T0 + rel)[0], f"target T0{rel:+d}"
    finally:
        consumer.close()


def test_offsets_for_times_kafka_python(topics):
    from kafka import KafkaConsumer, TopicPartition
    kc = KafkaConsumer(bootstrap_servers=topics, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(TOPIC, 0)
    try:
        for rel in TARGETS:
            if T0 + rel < 0:
                continue
            found = kc.offsets_for_times({tp: T0 + rel})[tp]
            offset, ts = expected_for(T0 + rel)
            if offset < 0:
                assert found is None, f"target T0{rel:+d}: {found}"
            else:
                assert (found.offset, found.timestamp) == (offset, ts), f"target T0{rel:+d}"
    finally:
        kc.close()


@pytest.mark.parametrize("version", [7, 8, 9, 10])
def test_max_timestamp_raw(topics, version):
    max_ts = max(ALL_TS)
    p = list_offsets(topics, TOPIC, MAX_TIMESTAMP, version)
    assert p.error_code == 0
    assert (p.offset, p.timestamp) == (ALL_TS.index(max_ts), max_ts)
    p = list_offsets(topics, EMPTY, MAX_TIMESTAMP, version)
    assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)


def test_max_timestamp_confluent_admin(topics):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient({"bootstrap.servers": topics})
    tp = TopicPartition(TOPIC, 0)
    specs = {"max": OffsetSpec.max_timestamp(), "earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "t4500": OffsetSpec.for_timestamp(T0 + 4500)}
    results = {name: admin.list_offsets({tp: spec})[tp].result(timeout=30) for name, spec in specs.items()}
    max_ts = max(ALL_TS)
    assert (results["max"].offset, results["max"].timestamp) == (ALL_TS.index(max_ts), max_ts)
    assert results["earliest"].offset == 0
    assert results["latest"].offset == len(ALL_TS)
    assert (results["t4500"].offset, results["t4500"].timestamp) == expected_for(T0 + 4500)


@pytest.mark.parametrize("version", [2, 5, 7, 10])
def test_read_committed_latest_is_high_watermark(shared_broker, version):
    bootstrap = shared_broker.bootstrap
    topic = f"lo-isolation-v{version}"
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in (5, 12):
        for i in range(n):
            producer.produce(topic, b"x%d" % i, partition=0)  # auto-created topic
        assert producer.flush(30) == 0
        hw = list_offsets(bootstrap, topic, LATEST, version, isolation_level=0)
        lso = list_offsets(bootstrap, topic, LATEST, version, isolation_level=1)
        assert hw.error_code == lso.error_code == 0
        assert lso.offset == hw.offset
    assert hw.offset == 17


@pytest.mark.parametrize("timestamp", [LATEST, EARLIEST, MAX_TIMESTAMP, 0])
def test_unknown_topic_or_partition(topics, timestamp):
    code = ke.UnknownTopicOrPartitionError.errno
    p = list_offsets(topics, "lo-no-such-topic", timestamp, 7)
    assert p.error_code == code
    p = list_offsets(topics, TOPIC, timestamp, 7, partition=5)
    assert p.error_code == code
