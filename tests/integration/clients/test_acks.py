"""Produce with acks=0 / 1 / all through stock clients: every record lands, in order, exactly once."""
from __future__ import annotations

import pytest

from tests.support.helpers import (
    RawClient,
    build_batch,
    confluent_consume,
    confluent_watermarks,
    metadata_raw,
    produce_request,
    wait_broker_connections_closed,
    wait_topic_ready,
    wait_until,
)

PARTITIONS = 3
PER_PARTITION = 400



@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


def _create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    wait_topic_ready(bootstrap, topic, partitions)


def _values(tag: str) -> dict[int, list[bytes]]:
    return {p: [f"{tag}-p{p}-{i:05d}".encode() for i in range(PER_PARTITION)] for p in range(PARTITIONS)}


def _wait_landed(bootstrap: str, topic: str) -> None:
    """acks=0 gives no delivery report from the broker: poll the end offsets until everything is there."""
    for p in range(PARTITIONS):
        wait_until(lambda: confluent_watermarks(bootstrap, topic, p)[1] >= PER_PARTITION, timeout=15,
                   what=f"{topic}[{p}] high watermark to reach {PER_PARTITION}")


def _check(bootstrap: str, topic: str, values: dict[int, list[bytes]]) -> None:
    got = confluent_consume(bootstrap, topic, {p: len(v) for p, v in values.items()})
    for p, msgs in got.items():
        assert [m.offset() for m in msgs] == list(range(PER_PARTITION)), f"partition {p}: offsets"
        assert [m.value() for m in msgs] == values[p], f"partition {p}: values out of order or wrong"
        assert [m.key() for m in msgs] == [b"k%d" % i for i in range(PER_PARTITION)]
        # exactly once: nothing beyond what we sent
        assert confluent_watermarks(bootstrap, topic, p) == (0, PER_PARTITION)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks(shared_broker, acks):
    from confluent_kafka import Producer
    bootstrap = shared_broker.bootstrap
    topic = f"acks-confluent-{acks}"
    _create(bootstrap, topic)
    values = _values(topic)
    delivered, errors = [], []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or msg)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "enable.idempotence": False, "max.in.flight.requests.per.connection": 1})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(topic, values[p][i], b"k%d" % i, partition=p, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert not errors, errors[:3]
    assert len(delivered) == PARTITIONS * PER_PARTITION
    if acks == "0":
        # librdkafka reports offset -1 for acks=0 (no response from the broker to carry one)
        _wait_landed(bootstrap, topic)
    else:
        for msg in delivered:
            assert msg.offset() >= 0
        per_p = {p: sorted(m.offset() for m in delivered if m.partition() == p) for p in range(PARTITIONS)}
        assert all(offs == list(range(PER_PARTITION)) for offs in per_p.values())
    _check(bootstrap, topic, values)


@pytest.mark.parametrize("acks", [0, 1])
def test_kafka_python_acks(shared_broker, acks):
    from kafka import KafkaProducer
    bootstrap = shared_broker.bootstrap
    topic = f"acks-kafka-python-{acks}"
    _create(bootstrap, topic)
    values = _values(topic)
    # kafka-python 3 defaults to idempotence, which requires acks=all: turn it off for acks 0/1
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=False, linger_ms=5,
                             max_in_flight_requests_per_connection=1)
    try:
        futures = [producer.send(topic, value=values[p][i], key=b"k%d" % i, partition=p)
                   for i in range(PER_PARTITION) for p in range(PARTITIONS)]
        producer.flush(30)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    if acks == 0:
        _wait_landed(bootstrap, topic)
    else:
        per_p = {p: [m.offset for m in metas if m.partition == p] for p in range(PARTITIONS)}
        assert all(offs == list(range(PER_PARTITION)) for offs in per_p.values()), "acks=1 offsets"
    _check(bootstrap, topic, values)


def test_raw_acks0_gets_no_response(shared_broker):
    """Produce acks=0 must not be answered: the next response on the connection belongs to the next request."""
    bootstrap = shared_broker.bootstrap
    topic = "acks-raw-0"
    _create(bootstrap, topic, 1)
    with RawClient(bootstrap) as client:
        client.send(produce_request(topic, build_batch([b"a", b"b", b"c"]), acks=0), 9)
        md = metadata_raw(client, [topic])  # asserts the correlation id of the answer is the Metadata's
        assert md.topics[0].error_code == 0
    wait_until(lambda: confluent_watermarks(bootstrap, topic, 0) == (0, 3), timeout=10, what="3 records")
