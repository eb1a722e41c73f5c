"""An application's tests: real confluent-kafka clients against the `minikafka` fixtures."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in values:
        p.produce(topic, v)
    assert p.flush(15) == 0  # every record acked


def consume(bootstrap, topic, expected, partitions=1):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "app", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, deadline = [], time.monotonic() + 20
    while len(out) < expected and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and not m.error():
            out.append(m.value())
    c.close()
    return out


@pytest.mark.parametrize("n", [1, 10, 100])
def test_roundtrip(minikafka, n):
    topic = f"orders-{uuid.uuid4().hex[:8]}"  # the session broker is shared: one topic per test
    minikafka.create_topic(topic, partitions=3)
    values = [f"order-{i}".encode() for i in range(n)]
    produce(minikafka.bootstrap_servers, topic, values)
    assert sorted(consume(minikafka.bootstrap_servers, topic, n, partitions=3)) == sorted(values)


def test_ini_config_reaches_the_broker(minikafka, pytestconfig):
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    md = Producer({"bootstrap.servers": minikafka.bootstrap_servers}).list_topics(topic, timeout=10)
    expected = int(dict(kv.split("=") for kv in pytestconfig.getoption("minikafka_config"))
                   .get("num.partitions", 2))
    assert len(md.topics[topic].partitions) == expected


def test_brokers_from_the_factory_are_isolated(minikafka, minikafka_factory):
    other = minikafka_factory(config={"num.partitions": "1"})
    assert other.bootstrap_servers != minikafka.bootstrap_servers
    other.create_topic("events")
    produce(other.bootstrap_servers, "events", [b"only here"])
    topics = Producer({"bootstrap.servers": minikafka.bootstrap_servers}).list_topics(timeout=10).topics
    assert "events" not in topics


def test_kill_and_start_keep_acked_records(minikafka_factory):
    kafka = minikafka_factory()
    kafka.create_topic("payments")
    produce(kafka.bootstrap_servers, "payments", [b"a", b"b", b"c"])
    port = kafka.port
    kafka.kill()                 # SIGKILL: a real crash
    kafka.start()                # back on the same port and data dir
    assert kafka.port == port
    assert consume(kafka.bootstrap_servers, "payments", 3) == [b"a", b"b", b"c"]
