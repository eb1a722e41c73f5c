"""minikafka.testing.MiniKafka: the plain-Python API behind the pytest plugin, with real clients.

Each test starts its own broker subprocess (that is the API under test), so they are minikafka-only.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from minikafka.testing import MiniKafka, MiniKafkaError

pytestmark = pytest.mark.minikafka_only


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
    errors = []
    for v in values:
        p.produce(topic, v, key=v, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(15) == 0
    assert errors == []


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and not m.error():
                out.append(m.value())
    finally:
        c.close()
    return out


def test_acked_data_survives_kill_and_start():
    with MiniKafka(config={"num.partitions": 3}) as kafka:
        kafka.create_topic("orders", partitions=2)
        values = [f"v{i}".encode() for i in range(200)]
        _produce(kafka.bootstrap_servers, "orders", values)
        port, pid = kafka.port, kafka.pid
        kafka.kill()
        assert not kafka.alive()
        kafka.start()
        assert kafka.port == port and kafka.pid != pid
        assert sorted(_consume_all(kafka.bootstrap_servers, "orders", 2, len(values))) == sorted(values)
        # the broker-level config reached the broker: auto-created topics get num.partitions=3
        p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        md = p.list_topics("auto", timeout=10)
        assert len(md.topics["auto"].partitions) == 3


def test_restart_keeps_port_and_data_and_temp_dir_is_removed():
    kafka = MiniKafka()
    try:
        workdir = kafka.data_dir.parent
        kafka.create_topic("compacted", partitions=1, config={"cleanup.policy": "compact"})
        _produce(kafka.bootstrap_servers, "compacted", [b"a"])
        port = kafka.port
        assert kafka.stop() == 0  # a clean shutdown
        kafka.restart()
        assert kafka.port == port
        assert _consume_all(kafka.bootstrap_servers, "compacted", 1, 1) == [b"a"]
        with pytest.raises(MiniKafkaError, match="TopicAlreadyExists"):
            kafka.create_topic("compacted")
        kafka.delete_topic("compacted")
        with pytest.raises(MiniKafkaError, match="UnknownTopicOrPartition"):
            kafka.delete_topic("compacted")
    finally:
        kafka.close()
    assert not kafka.alive()
    assert not workdir.exists()


def test_given_data_dir_is_kept(tmp_path):
    data = tmp_path / "keep"
    with MiniKafka(data_dir=data) as kafka:
        kafka.create_topic("kept")
        _produce(kafka.bootstrap_servers, "kept", [b"x"])
    assert any(p.name.startswith("kept-") for p in data.iterdir())
    with MiniKafka(data_dir=data) as again:  # a new broker on the old data, on another free port
        assert _consume_all(again.bootstrap_servers, "kept", 1, 1) == [b"x"]


def test_bad_config_error_carries_log_tail():
    with pytest.raises(MiniKafkaError) as info:
        MiniKafka(config={"num.partitions": "lots"}, startup_timeout=20)
    text = str(info.value)
    assert "exited with code 2" in text
    assert "configuration error" in text and "lots" in text, text


def test_not_started_until_asked_and_admin_url_seam():
    kafka = MiniKafka(start=False)
    try:
        assert not kafka.alive() and kafka.admin_url is None
        with kafka:
            assert kafka.alive() and kafka.startup_seconds is not None
    finally:
        kafka.close()
    k2 = MiniKafka(config={"minikafka.metrics.listener": "http://127.0.0.1:9644"}, start=False)
    assert k2.admin_url == "http://127.0.0.1:9644"
    k2.close()
