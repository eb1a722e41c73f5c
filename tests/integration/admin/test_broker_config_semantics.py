"""Broker config keys do what they say or are refused: dynamic changes that act at once
(transaction.partition.verification.enable, log.roll.jitter.ms as the topics' segment.jitter.ms), per-IP
connection limits, and the values minikafka refuses instead of ignoring (Java plug-in classes, connection
creation rate quotas, a listener's TLS settings changed at runtime). The dynamic ones run on Apache Kafka
too (and restore what they changed: the oracle is shared)."""
from __future__ import annotations

import socket
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from minikafka.testing import MiniKafka, MiniKafkaError
from tests.support.helpers import RawClient, list_offset, wait_until
from tests.integration.admin.test_broker_configs import BROKER_RES, DELETE, SET, raw_incremental
from tests.support.txn_helpers import add_partitions, end_txn, find_txn_coordinator, init_producer_id, produce_txn, txn_batch

INVALID_TXN_STATE = 48


def set_default(bootstrap: str, name: str, value: str | None) -> None:
    """Set (or with None delete) a cluster-default dynamic broker config (raw IncrementalAlterConfigs:
    confluent-kafka does not name the default resource)."""
    code, message = raw_incremental(bootstrap, BROKER_RES, "", [(name, SET if value is not None else DELETE, value)])
    assert code == 0, message


def test_verification_switch_acts_at_once(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    with RawClient(broker.bootstrap) as c:
        # Kafka elects the leaders after CreateTopics answers
        wait_until(lambda: all(list_offset(c, topic, p)[0] == 0 for p in (0, 1)), timeout=30, what="leaders")
        tid = f"{topic}-tx"
        assert find_txn_coordinator(c, tid).error_code == 0
        r = init_producer_id(c, tid)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        stray = txn_batch(pid, epoch, 0, [b"stray"])
        assert produce_txn(c, tid, topic, 1, stray, version=9).error_code == INVALID_TXN_STATE
        set_default(broker.bootstrap, "transaction.partition.verification.enable", "false")
        try:  # Kafka applies broker config changes asynchronously
            wait_until(lambda: produce_txn(c, tid, topic, 1, stray, version=9).error_code == 0, timeout=15,
                       interval=0.2, what="a stray transactional batch accepted without verification")
        finally:
            set_default(broker.bootstrap, "transaction.partition.verification.enable", None)
        assert end_txn(c, tid, pid, epoch, False) == 0


def test_log_roll_jitter_is_the_topics_segment_jitter(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"jitter-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)

    def jitter():
        entry = admin.describe_configs([res])[res].result(30)["segment.jitter.ms"]
        return entry.value, entry.source

    assert jitter()[0] == "0"
    set_default(broker.bootstrap, "log.roll.jitter.ms", "7000")
    try:
        wait_until(lambda: jitter() == ("7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value), timeout=15,
                   interval=0.2, what="segment.jitter.ms from the dynamic log.roll.jitter.ms")
    finally:
        set_default(broker.bootstrap, "log.roll.jitter.ms", None)
    wait_until(lambda: jitter()[0] == "0", timeout=15, interval=0.2, what="segment.jitter.ms back to 0")


@pytest.mark.minikafka_only
def test_per_ip_override_limits_connections(broker_factory):
    b = broker_factory({"max.connections.per.ip": "100", "max.connections.per.ip.overrides": "127.0.0.1:2"})
    host, port = b.bootstrap.split(":")
    held = [RawClient(b.bootstrap), RawClient(b.bootstrap)]
    try:
        third = socket.create_connection((host, int(port)), timeout=5)
        third.settimeout(5)
        assert third.recv(1) == b""  # closed by the broker: the override's limit, not max.connections.per.ip
        third.close()
        wait_until(lambda: "max.connections.per.ip.overrides=2 for 127.0.0.1" in b.log_text(), timeout=15,
                   what="the refusal logged with the override's limit")
    finally:
        for c in held:
            c.close()
    set_default(b.bootstrap, "max.connections.per.ip.overrides", "localhost:3")  # a host name is resolved
    clients = [RawClient(b.bootstrap) for _ in range(3)]
    try:
        fourth = socket.create_connection((host, int(port)), timeout=5)
        fourth.settimeout(5)
        assert fourth.recv(1) == b""
        fourth.close()
    finally:
        for c in clients:
            c.close()


@pytest.mark.minikafka_only
@pytest.mark.parametrize("name, value, code", [
    ("principal.builder.class", "com.example.MyPrincipalBuilder", "INVALID_CONFIG"),
    ("metric.reporters", "com.example.Reporter", "INVALID_CONFIG"),
    ("listener.name.plaintext.ssl.keystore.location", "/etc/new.jks", "INVALID_REQUEST"),
])
def test_values_minikafka_cannot_honour_are_refused(shared_broker, name, value, code):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([res])[res].result(30)
    assert exc.value.args[0].name() == code, exc.value.args[0].str()


@pytest.mark.minikafka_only
def test_a_static_value_minikafka_cannot_honour_stops_the_start(tmp_path):
    kafka = MiniKafka(config={"principal.builder.class": "com.example.MyPrincipalBuilder"}, data_dir=tmp_path / "d",
                      start=False, startup_timeout=20)
    try:
        with pytest.raises(MiniKafkaError, match="exited with code 2"):
            kafka.start()
        assert "principal.builder.class=com.example.MyPrincipalBuilder is not supported" in kafka.log_text()
    finally:
        kafka.close()
    ok = MiniKafka(config={"principal.builder.class":
                           "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"})
    try:
        assert "unknown config key" not in ok.log_text()
    finally:
        ok.close()
