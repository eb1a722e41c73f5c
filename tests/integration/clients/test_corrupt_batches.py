"""Corrupt client batches (issue 11): each case is raw bytes with a VALID CRC, so only record-level
validation (Kafka's LogValidator) can refuse it. The expected codes are Apache Kafka 4.3.1's answers:

    .venv/bin/python -m pytest tests/integration/clients/test_corrupt_batches.py --broker=kafka

After every case a valid canary record is produced to the same partition and read back (from the
beginning of the partition, so through whatever the case left stored) by confluent-kafka and
kafka-python, which must not stall. The corpus itself lives in tests/support/corrupt_batches.py.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.corrupt_batches import OK, ZSTD, Case, batch, corpus, records
from tests.support.helpers import RawClient, build_batch, confluent_consumer, produce_raw, wait_topic_ready

CASES = corpus()
RUN = str(time.time_ns())[-9:]


def _topic(case: Case) -> str:
    return f"cb-{case.name}-{RUN}"


@pytest.fixture(scope="module")
def topics(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    futures = admin.create_topics([NewTopic(_topic(c), 1, 1, config=c.topic_config) for c in CASES])
    for f in futures.values():
        f.result(30)
    for c in CASES:
        wait_topic_ready(shared_broker.bootstrap, _topic(c), 1)
    return shared_broker


def _is_kafka(request) -> bool:
    return request.config.getoption("--broker") != "minikafka"


def _confluent_reads(bootstrap: str, topic: str, value: bytes, timeout: float = 20.0) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
    consumer = confluent_consumer(bootstrap)
    seen: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while value not in seen:
            assert time.monotonic() < deadline, f"confluent-kafka stalled on {topic}: read {len(seen)} records"
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    continue
                seen.append(msg.value())
    finally:
        consumer.close()
    return seen


def _kafka_python_reads(bootstrap: str, topic: str, value: bytes, timeout: float = 20.0) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    seen: list[bytes] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while value not in seen:
            assert time.monotonic() < deadline, f"kafka-python stalled on {topic}: read {len(seen)} records"
            for msgs in consumer.poll(timeout_ms=500, max_records=1000).values():
                seen.extend(m.value for m in msgs)
    finally:
        consumer.close()
    return seen


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corrupt_batch(topics, request, case: Case):
    kafka = _is_kafka(request)
    expected = case.expected(kafka)
    topic = _topic(case)
    with RawClient(topics.bootstrap) as client:
        resp = produce_raw(client, topic, case.build(int(time.time() * 1000)))
        assert resp.error_code == expected, (case.name, resp)
        if expected != OK:
            assert resp.base_offset == -1
        if case.batch_index is not None and case.code == expected:
            assert resp.record_errors and resp.record_errors[0].batch_index == case.batch_index, resp
            assert resp.error_message, resp
        canary = f"canary-{case.name}".encode()
        ok = produce_raw(client, topic, build_batch([canary], keys=[b"k"]))
        assert ok.error_code == 0, ok
        # nothing of a refused batch was stored: the canary is the partition's first record
        assert ok.base_offset == (0 if expected != OK else ok.base_offset)
    for name, read in (("confluent-kafka", _confluent_reads), ("kafka-python", _kafka_python_reads)):
        if expected == OK and name in case.unreadable_by:
            continue
        seen = read(topics.bootstrap, topic, canary)
        if expected != OK:
            assert seen == [canary], (read.__name__, seen)


def test_produce_to_unknown_topic_does_not_create_it(shared_broker):
    """Kafka auto-creates topics on Metadata only: a Produce to an unknown topic is refused."""
    name = f"cb-unknown-{RUN}"
    with RawClient(shared_broker.bootstrap) as client:
        resp = produce_raw(client, name, build_batch([b"x"]))
        assert resp.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        from tests.support.helpers import metadata_raw
        (t,) = metadata_raw(client, [name], auto_create=False).topics
        assert t.error_code == 3


@pytest.mark.minikafka_only
def test_decompression_bound_is_a_config_key(broker_factory):
    """minikafka.max.uncompressed.batch.bytes: a small zstd payload that inflates past it is refused
    (a deliberate bound Kafka does not have); the same batch passes under the default 64 MiB."""
    broker = broker_factory(overrides={"minikafka.max.uncompressed.batch.bytes": str(1 << 20)})
    data = batch(records(4096, value=b"\x00" * 1000), count=4096, codec=ZSTD, base_ts=int(time.time() * 1000))
    assert len(data) < 100_000
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("bomb", 1, 1)]).values():
        f.result(30)
    with RawClient(broker.bootstrap) as client:
        resp = produce_raw(client, "bomb", data)
        assert resp.error_code == 87, resp
        assert "minikafka.max.uncompressed.batch.bytes" in resp.error_message
        ok = produce_raw(client, "bomb", build_batch([b"fine"]))
        assert (ok.error_code, ok.base_offset) == (0, 0)
    assert "Traceback" not in broker.log_text()
