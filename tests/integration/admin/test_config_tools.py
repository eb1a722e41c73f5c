"""Kafka's own admin tools against the broker: kafka-configs on brokers (--entity-default and
--entity-name 1) and groups, kafka-topics --describe (DescribeTopicPartitions in Kafka 4.x).
Black-box (also runs with --broker=kafka); every change is undone.
"""
from __future__ import annotations

import re
import sys
import time
import uuid

import pytest

from tests.conftest import ROOT
from tests.support.helpers import wait_broker_connections_closed, wait_topic_ready

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def kafka_tools(shared_broker):
    lab.fetch()
    yield lab
    wait_broker_connections_closed(shared_broker)


def tool(name: str, *args: str, ok: bool = True, timeout: float = 90) -> str:
    res = lab.run_tool(name, [str(a) for a in args], timeout=timeout)
    out = f"$ {name} {' '.join(map(str, args))}\n--- exit {res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    if ok:
        assert res.returncode == 0, out
        assert "Exception" not in res.stderr, out
    return res.stdout + res.stderr


def configs(bs: str, *entity: str) -> str:
    return tool("kafka-configs", "--bootstrap-server", bs, "--describe", *entity)


def eventually(fn, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_kafka_configs_broker_default_and_per_broker(shared_broker):
    bs = shared_broker.bootstrap
    default = ("--entity-type", "brokers", "--entity-default")
    one = ("--entity-type", "brokers", "--entity-name", "1")
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *default, "--add-config", "log.retention.ms=7200000")
    try:
        def check_default():
            out = configs(bs, *default)
            assert "Default configs for brokers in the cluster are:" in out, out
            assert ("log.retention.ms=7200000 sensitive=false "
                    "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}") in out, out
        eventually(check_default)
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *one, "--add-config",
             "log.retention.ms=3600000,log.cleaner.backoff.ms=16000")

        def check_one():
            out = configs(bs, *one)
            assert "Dynamic configs for broker 1 are:" in out, out
            assert re.search(r"log\.retention\.ms=3600000 sensitive=false synonyms=\{"
                             r"DYNAMIC_BROKER_CONFIG:log\.retention\.ms=3600000, "
                             r"DYNAMIC_DEFAULT_BROKER_CONFIG:log\.retention\.ms=7200000", out), out
            assert "log.cleaner.backoff.ms=16000" in out, out
        eventually(check_one)
        all_out = configs(bs, *one, "--all")
        assert "All configs for broker 1 are:" in all_out
        assert re.search(r"^\s*log\.retention\.ms=3600000 sensitive=false", all_out, re.M), all_out
        # a read-only config is refused with Kafka's message
        out = tool("kafka-configs", "--bootstrap-server", bs, "--alter", *one, "--add-config", "log.dirs=/tmp/x",
                   ok=False)
        assert "Cannot update these configs dynamically" in out, out
    finally:
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *one, "--delete-config",
             "log.retention.ms,log.cleaner.backoff.ms")
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *default, "--delete-config", "log.retention.ms")
    eventually(lambda: (lambda out: ("log.retention.ms=" not in out) or pytest.fail(out))(configs(bs, *default)))


def test_kafka_configs_replication_throttles(shared_broker):
    """What `kafka-reassign-partitions --throttle` sets: the broker's throttle rates (known LONG keys, not
    sensitive) and a topic's throttled replica lists ('*' or partition:broker entries, else INVALID_CONFIG
    with Kafka's message)."""
    bs = shared_broker.bootstrap
    topic = f"throttled-{uuid.uuid4().hex[:8]}"
    tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "2")
    wait_topic_ready(bs, topic, 2)
    one = ("--entity-type", "brokers", "--entity-name", "1")
    rates = "leader.replication.throttled.rate,follower.replication.throttled.rate"
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *one, "--add-config",
         "leader.replication.throttled.rate=1000000,follower.replication.throttled.rate=2000000")
    try:
        def check_rates():
            out = configs(bs, *one)
            assert ("leader.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                    "leader.replication.throttled.rate=1000000}") in out, out
            assert "follower.replication.throttled.rate=2000000 sensitive=false" in out, out
        eventually(check_rates)
        bad = tool("kafka-configs", "--bootstrap-server", bs, "--alter", *one, "--add-config",
                   "leader.replication.throttled.rate=fast", ok=False)
        assert "InvalidRequestException" in bad or "InvalidConfigurationException" in bad, bad
    finally:
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *one, "--delete-config", rates)
    on_topic = ("--entity-type", "topics", "--entity-name", topic)
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *on_topic, "--add-config",
         "leader.replication.throttled.replicas=[0:1,1:1],follower.replication.throttled.replicas=*")

    def check_topic():
        out = configs(bs, *on_topic)
        assert "leader.replication.throttled.replicas=0:1,1:1 sensitive=false" in out, out
        assert "follower.replication.throttled.replicas=* sensitive=false" in out, out
    eventually(check_topic)
    bad = tool("kafka-configs", "--bootstrap-server", bs, "--alter", *on_topic, "--add-config",
               "leader.replication.throttled.replicas=bogus", ok=False)
    assert ("leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following "
            "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...") in bad, bad
    tool("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", topic)


def test_kafka_configs_group(shared_broker):
    bs = shared_broker.bootstrap
    group = ("--entity-type", "groups", "--entity-name", f"tool-group-{uuid.uuid4().hex[:8]}")
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *group, "--add-config",
         "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")

    def check():
        out = configs(bs, *group)
        assert ("consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
                "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}") in out, out
        assert "consumer.heartbeat.interval.ms=6000" in out, out
    eventually(check)
    out = tool("kafka-configs", "--bootstrap-server", bs, "--alter", *group, "--add-config",
               "consumer.session.timeout.ms=1000", ok=False)
    assert "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms" in out
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *group, "--delete-config",
         "consumer.session.timeout.ms,consumer.heartbeat.interval.ms")
    eventually(lambda: (lambda out: "consumer.session.timeout.ms=50000" not in out or pytest.fail(out))(
        configs(bs, *group)))


def test_kafka_topics_describe(shared_broker):
    bs = shared_broker.bootstrap
    topic = f"tool-describe-{uuid.uuid4().hex[:8]}"
    tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "3",
         "--replication-factor", "1", "--config", "retention.ms=123456")
    wait_topic_ready(bs, topic, 3)
    # one partition per response: the Java client follows DescribeTopicPartitions' next_cursor
    out = tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", topic,
               "--partition-size-limit-per-response", "1")
    assert re.search(rf"Topic: {topic}\s+TopicId: \S+\s+PartitionCount: 3\s+ReplicationFactor: 1\s+"
                     r"Configs: .*retention\.ms=123456", out), out
    rows = re.findall(rf"Topic: {topic}\s+Partition: (\d+)\s+Leader: 1\s+Replicas: 1\s+Isr: 1\s+"
                      r"Elr: ?\s+LastKnownElr: ?\s*$", out, re.M)
    assert rows == ["0", "1", "2"], out
    # a missing topic: the tool's error (UNKNOWN_TOPIC_OR_PARTITION from DescribeTopicPartitions)
    out = tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", topic + "-missing", ok=False)
    assert "does not exist" in out or "UnknownTopicOrPartition" in out, out
