"""Admin APIs through stock clients: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DescribeCluster, DeleteRecords, topic auto-creation, and the minikafka CLI.

Error codes are Apache Kafka's (kafka.errors); confluent-kafka surfaces them as KafkaError.code().
"""
from __future__ import annotations

import subprocess
import time

import kafka.errors as ke
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from minikafka.testing import minikafka_command, subprocess_env
from tests.conftest import ROOT
from tests.support.helpers import (
    RawClient,
    build_batch,
    confluent_consume,
    confluent_watermarks,
    metadata_raw,
    produce_raw,
    wait_broker_connections_closed,
    wait_topic_ready,
    wait_until,
)

TIMEOUT = 30
DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


def new_admin(broker) -> AdminClient:
    # A local, not a fixture: function-scoped fixture values outlive the module's teardown for the
    # module's last test, and a live client keeps its connection to the shared broker open.
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_of(future) -> int:
    """0 on success, else the Kafka error code the future failed with."""
    try:
        future.result(timeout=TIMEOUT)
        return 0
    except KafkaException as exc:
        return exc.args[0].code()


def topic_names(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=TIMEOUT).topics)


def partition_count(bootstrap: str, topic: str) -> int:
    """Partitions per Metadata, without asking for auto-creation; -error_code if the topic is missing."""
    with RawClient(bootstrap) as client:
        (t,) = metadata_raw(client, [topic]).topics
    return len(t.partitions) if t.error_code == 0 else -t.error_code


def describe(admin: AdminClient, topic: str) -> dict[str, tuple[str, int]]:
    """name -> (value, source) for a topic's configs."""
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + TIMEOUT
    while True:  # Apache Kafka may not know a just-created topic yet (metadata propagates async)
        try:
            entries = admin.describe_configs([res])[res].result(timeout=TIMEOUT)
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return {name: (e.value, getattr(e.source, "value", e.source)) for name, e in entries.items()}


# --- CreateTopics ------------------------------------------------------------------------------

def test_create_topic_shows_in_metadata(shared_broker):
    admin = new_admin(shared_broker)
    assert error_of(admin.create_topics([NewTopic("adm-created", 4, 1)])["adm-created"]) == 0
    # Apache Kafka answers CreateTopics before its metadata cache has the topic; minikafka at once
    wait_until(lambda: "adm-created" in topic_names(admin), timeout=TIMEOUT, what="topic in metadata")
    wait_until(lambda: partition_count(shared_broker.bootstrap, "adm-created") == 4, timeout=TIMEOUT, what="metadata to settle")
    md = admin.list_topics("adm-created", timeout=TIMEOUT).topics["adm-created"]
    assert sorted(md.partitions) == [0, 1, 2, 3]
    for p in md.partitions.values():
        assert (p.leader, p.replicas, p.isrs) == (1, [1], [1])


def test_create_topics_validate_only_creates_nothing(shared_broker):
    admin = new_admin(shared_broker)
    fs = admin.create_topics([NewTopic("adm-validate", 3, 1)], validate_only=True)
    assert error_of(fs["adm-validate"]) == 0
    assert "adm-validate" not in topic_names(admin)
    wait_until(lambda: partition_count(shared_broker.bootstrap, "adm-validate") == -ke.UnknownTopicOrPartitionError.errno, timeout=TIMEOUT, what="metadata to settle")
    # validation still reports errors
    fs = admin.create_topics([NewTopic("adm-validate", 3, 2)], validate_only=True)
    assert error_of(fs["adm-validate"]) == ke.InvalidReplicationFactorError.errno
    # and the name stays free for a real create
    assert error_of(admin.create_topics([NewTopic("adm-validate", 3, 1)])["adm-validate"]) == 0
    wait_until(lambda: partition_count(shared_broker.bootstrap, "adm-validate") == 3, timeout=TIMEOUT, what="metadata to settle")


def test_create_topic_replication_factor_2_is_invalid(shared_broker):
    admin = new_admin(shared_broker)
    assert error_of(admin.create_topics([NewTopic("adm-rf2", 1, 2)])["adm-rf2"]) == \
        ke.InvalidReplicationFactorError.errno
    assert "adm-rf2" not in topic_names(admin)


def test_create_duplicate_topic(shared_broker):
    admin = new_admin(shared_broker)
    assert error_of(admin.create_topics([NewTopic("adm-dup", 2, 1)])["adm-dup"]) == 0
    assert error_of(admin.create_topics([NewTopic("adm-dup", 5, 1)])["adm-dup"]) == ke.TopicAlreadyExistsError.errno
    assert len(admin.list_topics(timeout=TIMEOUT).topics["adm-dup"].partitions) == 2  # untouched


def test_the_metadata_log_is_no_topic(shared_broker):
    """Kafka (KRaft) refuses to create `__cluster_metadata` (its metadata log; minikafka's quorum log
    lives in that directory name too)."""
    admin = new_admin(shared_broker)
    assert error_of(admin.create_topics([NewTopic("__cluster_metadata", 1, 1)])["__cluster_metadata"]) == \
        ke.InvalidRequestError.errno
    assert "__cluster_metadata" not in topic_names(admin)


@pytest.mark.parametrize("name", ["bad name", "bad/name", "..", ".", "x" * 250, "ünïcode"])
def test_create_topic_invalid_name(shared_broker, name):
    admin = new_admin(shared_broker)
    assert error_of(admin.create_topics([NewTopic(name, 1, 1)])[name]) == ke.InvalidTopicError.errno
    assert name not in topic_names(admin)


def test_create_topic_invalid_partition_count(shared_broker):
    admin = new_admin(shared_broker)
    assert error_of(admin.create_topics([NewTopic("adm-zero-parts", 0, 1)])["adm-zero-parts"]) == \
        ke.InvalidPartitionsError.errno


def test_create_topic_with_configs_visible_in_describe(shared_broker):
    admin = new_admin(shared_broker)
    topic = "adm-configs"
    defaults_before = describe(admin, "adm-created")
    configs = {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "2000000",
               "segment.bytes": "10485760"}
    assert error_of(admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic]) == 0
    described = describe(admin, topic)
    for name, value in configs.items():
        assert described[name] == (value, DYNAMIC_TOPIC), name
    # everything else keeps the broker default and is not reported as a topic override
    for name, (value, source) in described.items():
        if name not in configs:
            assert source != DYNAMIC_TOPIC, name
            assert defaults_before[name][0] == value, name
    # kafka-python sees the same
    from kafka.admin import ConfigResource as KResource, ConfigResourceType, KafkaAdminClient
    kadmin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        result = kadmin.describe_configs([KResource(ConfigResourceType.TOPIC, topic)])
    finally:
        kadmin.close()
    text = repr(result)
    assert "3600000" in text and "compact" in text


@pytest.mark.parametrize("configs", [{"retention.ms": "not-a-number"}, {"cleanup.policy": "sometimes"},
                                     {"no.such.config": "1"}])
def test_create_topic_invalid_config(shared_broker, configs):
    admin = new_admin(shared_broker)
    name = "adm-badcfg-" + next(iter(configs)).replace(".", "-")
    assert error_of(admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name]) == \
        ke.InvalidConfigurationError.errno
    assert name not in topic_names(admin)


# --- DeleteTopics ------------------------------------------------------------------------------

def test_delete_topic_then_produce_with_auto_create_off(broker_factory):
    broker = broker_factory(overrides={"auto.create.topics.enable": "false"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "adm-delete-me"
    assert error_of(admin.create_topics([NewTopic(topic, 2, 1)])[topic]) == 0
    with RawClient(broker.bootstrap) as client:
        p = produce_raw(client, topic, build_batch([b"a", b"b"]))
        assert (p.error_code, p.base_offset) == (0, 0)
    assert error_of(admin.delete_topics([topic])[topic]) == 0
    assert topic not in topic_names(admin)
    wait_until(lambda: partition_count(broker.bootstrap, topic) == -ke.UnknownTopicOrPartitionError.errno, timeout=TIMEOUT, what="metadata to settle")
    with RawClient(broker.bootstrap) as client:
        p = produce_raw(client, topic, build_batch([b"c"]))
        assert p.error_code == ke.UnknownTopicOrPartitionError.errno
        # Metadata asking for auto-creation must not resurrect it either
        (t,) = metadata_raw(client, [topic], auto_create=True).topics
        assert t.error_code == ke.UnknownTopicOrPartitionError.errno
    # deleting again: unknown topic
    assert error_of(admin.delete_topics([topic])[topic]) == ke.UnknownTopicOrPartitionError.errno
    # a re-created topic of the same name starts empty
    assert error_of(admin.create_topics([NewTopic(topic, 1, 1)])[topic]) == 0
    assert confluent_watermarks(broker.bootstrap, topic, 0) == (0, 0)


# --- CreatePartitions --------------------------------------------------------------------------

def test_create_partitions_increase_and_decrease(shared_broker):
    admin = new_admin(shared_broker)
    topic = "adm-grow"
    bootstrap = shared_broker.bootstrap
    assert error_of(admin.create_topics([NewTopic(topic, 2, 1)])[topic]) == 0
    assert error_of(admin.create_partitions([NewPartitions(topic, 5)])[topic]) == 0
    # Apache Kafka propagates metadata asynchronously even on one node; minikafka at once
    wait_until(lambda: partition_count(bootstrap, topic) == 5, timeout=TIMEOUT, what="5 partitions in metadata")
    wait_topic_ready(bootstrap, topic, 5)
    with RawClient(bootstrap) as client:
        p = produce_raw(client, topic, build_batch([b"new partition"]), partition=4)
        assert (p.error_code, p.base_offset) == (0, 0)
    assert confluent_watermarks(bootstrap, topic, 4) == (0, 1)
    # validate_only does not change anything
    assert error_of(admin.create_partitions([NewPartitions(topic, 8)], validate_only=True)[topic]) == 0
    wait_until(lambda: partition_count(bootstrap, topic) == 5, timeout=TIMEOUT, what="metadata to settle")
    # fewer or the same number of partitions: INVALID_PARTITIONS
    assert error_of(admin.create_partitions([NewPartitions(topic, 3)])[topic]) == ke.InvalidPartitionsError.errno
    assert error_of(admin.create_partitions([NewPartitions(topic, 5)])[topic]) == ke.InvalidPartitionsError.errno
    wait_until(lambda: partition_count(bootstrap, topic) == 5, timeout=TIMEOUT, what="metadata to settle")
    missing = "adm-grow-missing"
    assert error_of(admin.create_partitions([NewPartitions(missing, 3)])[missing]) == \
        ke.UnknownTopicOrPartitionError.errno


# --- DescribeConfigs / IncrementalAlterConfigs -------------------------------------------------

def _incremental(admin: AdminClient, topic: str, *entries: ConfigEntry) -> int:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=list(entries))
    return error_of(admin.incremental_alter_configs([res])[res])


def test_incremental_alter_configs_set_delete(shared_broker):
    admin = new_admin(shared_broker)
    topic = "adm-alter"
    assert error_of(admin.create_topics([NewTopic(topic, 1, 1)])[topic]) == 0
    default_value, default_source = describe(admin, topic)["retention.ms"]
    assert default_source != DYNAMIC_TOPIC
    assert int(default_value) == 7 * 24 * 3600 * 1000  # log.retention.hours=168

    assert _incremental(admin, topic, ConfigEntry("retention.ms", "123456",
                                                  incremental_operation=AlterConfigOpType.SET)) == 0
    assert describe(admin, topic)["retention.ms"] == ("123456", DYNAMIC_TOPIC)

    assert _incremental(admin, topic, ConfigEntry("retention.ms", None,
                                                  incremental_operation=AlterConfigOpType.DELETE)) == 0
    assert describe(admin, topic)["retention.ms"] == (default_value, default_source)

    # invalid value: INVALID_CONFIG and nothing changes
    assert _incremental(admin, topic, ConfigEntry("retention.ms", "soon",
                                                  incremental_operation=AlterConfigOpType.SET)) == \
        ke.InvalidConfigurationError.errno
    assert describe(admin, topic)["retention.ms"] == (default_value, default_source)



def test_incremental_alter_configs_subtract_append(shared_broker):
    # (Apache Kafka's describe reads a config cache that its metadata log updates asynchronously: awaited)
    admin = new_admin(shared_broker)
    topic = "adm-alter-list"
    fs = admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact,delete"})])
    assert error_of(fs[topic]) == 0
    assert _incremental(admin, topic, ConfigEntry("cleanup.policy", "delete",
                                                  incremental_operation=AlterConfigOpType.SUBTRACT)) == 0
    wait_until(lambda: describe(admin, topic)["cleanup.policy"] == ("compact", DYNAMIC_TOPIC), timeout=TIMEOUT,
               what="cleanup.policy described as compact (dynamic topic config)")
    assert _incremental(admin, topic, ConfigEntry("cleanup.policy", "delete",
                                                  incremental_operation=AlterConfigOpType.APPEND)) == 0
    wait_until(lambda: describe(admin, topic)["cleanup.policy"] == ("compact,delete", DYNAMIC_TOPIC), timeout=TIMEOUT,
               what="cleanup.policy described as compact,delete (dynamic topic config)")


def test_incremental_alter_configs_append_to_default(shared_broker):
    """APPEND on a list config the topic does not override appends to the default value
    (Kafka ConfigAdminManager: old value = topic override, else the config's default "delete")."""
    admin = new_admin(shared_broker)
    topic = "adm-alter-append-default"
    assert error_of(admin.create_topics([NewTopic(topic, 1, 1)])[topic]) == 0
    assert describe(admin, topic)["cleanup.policy"][0] == "delete"
    assert _incremental(admin, topic, ConfigEntry("cleanup.policy", "compact",
                                                  incremental_operation=AlterConfigOpType.APPEND)) == 0
    wait_until(lambda: describe(admin, topic)["cleanup.policy"] == ("delete,compact", DYNAMIC_TOPIC), timeout=TIMEOUT,
               what="cleanup.policy described as delete,compact (dynamic topic config)")


def test_incremental_alter_configs_unknown_topic(shared_broker):
    admin = new_admin(shared_broker)
    assert _incremental(admin, "adm-alter-missing", ConfigEntry(
        "retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)) == ke.UnknownTopicOrPartitionError.errno


def test_describe_configs_unknown_topic(shared_broker):
    admin = new_admin(shared_broker)
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm-describe-missing")
    assert error_of(admin.describe_configs([res])[res]) == ke.UnknownTopicOrPartitionError.errno


# --- DescribeCluster ---------------------------------------------------------------------------

def test_describe_cluster_and_stable_cluster_id(broker_factory):
    broker = broker_factory()

    def cluster(bootstrap):
        a = AdminClient({"bootstrap.servers": bootstrap})
        desc = a.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        md_cluster_id = a.list_topics(timeout=TIMEOUT).cluster_id
        return desc, md_cluster_id

    desc, md_id = cluster(broker.bootstrap)
    assert len(desc.nodes) == 1
    node = desc.nodes[0]
    assert (node.id, f"{node.host}:{node.port}") == (1, broker.bootstrap)
    assert desc.controller.id == 1
    assert desc.cluster_id and desc.cluster_id == md_id
    first_id = desc.cluster_id
    broker.restart()
    desc, md_id = cluster(broker.bootstrap)
    assert desc.cluster_id == md_id == first_id
    assert [n.id for n in desc.nodes] == [1]


# --- DeleteRecords -----------------------------------------------------------------------------

def test_delete_records_moves_low_watermark(shared_broker):
    admin = new_admin(shared_broker)
    bootstrap = shared_broker.bootstrap
    topic = "adm-delete-records"
    assert error_of(admin.create_topics([NewTopic(topic, 2, 1)])[topic]) == 0
    # idempotent: a retried batch (e.g. Kafka's leader not yet known right after creation) keeps its order
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 7,
                         "enable.idempotence": True})
    for i in range(100):
        producer.produce(topic, b"v%d" % i, partition=0)
        producer.produce(topic, b"w%d" % i, partition=1)
    assert producer.flush(TIMEOUT) == 0

    fs = admin.delete_records([TopicPartition(topic, 0, 37)])
    deleted = fs[TopicPartition(topic, 0, 37)].result(timeout=TIMEOUT)
    assert deleted.low_watermark == 37
    assert confluent_watermarks(bootstrap, topic, 0) == (37, 100)
    got = confluent_consume(bootstrap, topic, {0: 63})[0]
    assert [m.offset() for m in got] == list(range(37, 100))
    assert [m.value() for m in got] == [b"v%d" % i for i in range(37, 100)]

    # -1 (OFFSET_END) deletes everything up to the high watermark
    (f,) = admin.delete_records([TopicPartition(topic, 1, -1)]).values()
    assert f.result(timeout=TIMEOUT).low_watermark == 100
    assert confluent_watermarks(bootstrap, topic, 1) == (100, 100)

    # beyond the high watermark: OFFSET_OUT_OF_RANGE, nothing moves
    (f,) = admin.delete_records([TopicPartition(topic, 0, 101)]).values()
    assert error_of(f) == ke.OffsetOutOfRangeError.errno
    assert confluent_watermarks(bootstrap, topic, 0) == (37, 100)
    # an earlier offset than the current start is a no-op that reports the current low watermark
    (f,) = admin.delete_records([TopicPartition(topic, 0, 5)]).values()
    assert f.result(timeout=TIMEOUT).low_watermark == 37


# --- Auto-creation -----------------------------------------------------------------------------

def test_auto_create_on(broker_factory):
    broker = broker_factory(overrides={"num.partitions": "3"})
    with RawClient(broker.bootstrap) as client:
        # a Metadata request that does not allow auto-creation leaves the topic alone
        (t,) = metadata_raw(client, ["adm-auto-no"], auto_create=False).topics
        assert t.error_code == ke.UnknownTopicOrPartitionError.errno
        (t,) = metadata_raw(client, ["adm-auto"], auto_create=True).topics
        assert t.error_code == 0
        assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2]
        # it exists now, for everybody
        (t,) = metadata_raw(client, ["adm-auto"], auto_create=False).topics
        assert (t.error_code, len(t.partitions)) == (0, 3)
        all_topics = {t.name for t in metadata_raw(client, None).topics}
        assert "adm-auto" in all_topics and "adm-auto-no" not in all_topics
    # a stock producer writing to an unknown topic gets it created with num.partitions
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("adm-auto-producer", b"hello")
    assert producer.flush(TIMEOUT) == 0
    wait_until(lambda: partition_count(broker.bootstrap, "adm-auto-producer") == 3, timeout=TIMEOUT, what="metadata to settle")


def test_auto_create_off(broker_factory):
    broker = broker_factory(overrides={"auto.create.topics.enable": "false", "num.partitions": "3"})
    with RawClient(broker.bootstrap) as client:
        (t,) = metadata_raw(client, ["adm-noauto"], auto_create=True).topics
        assert t.error_code == ke.UnknownTopicOrPartitionError.errno
        p = produce_raw(client, "adm-noauto", build_batch([b"x"]))
        assert p.error_code == ke.UnknownTopicOrPartitionError.errno
        assert "adm-noauto" not in {t.name for t in metadata_raw(client, None).topics}
    # explicit creation still works and uses the requested partition count
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert error_of(admin.create_topics([NewTopic("adm-noauto", 2, 1)])["adm-noauto"]) == 0
    wait_until(lambda: partition_count(broker.bootstrap, "adm-noauto") == 2, timeout=TIMEOUT, what="metadata to settle")
    # num_partitions=-1 (broker default) is num.partitions
    assert error_of(admin.create_topics([NewTopic("adm-noauto-default", -1, -1)])["adm-noauto-default"]) == 0
    wait_until(lambda: partition_count(broker.bootstrap, "adm-noauto-default") == 3, timeout=TIMEOUT, what="metadata to settle")


# --- minikafka CLI -----------------------------------------------------------------------------

def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*minikafka_command(), "topics", *args,
                           "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=subprocess_env())


def test_cli_create_list_delete(shared_broker):
    admin = new_admin(shared_broker)
    bootstrap = shared_broker.bootstrap
    topic = "adm-cli"
    r = cli(bootstrap, "create", topic, "--partitions", "3", "--config", "retention.ms=86400000")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: partition_count(bootstrap, topic) == 3, timeout=TIMEOUT, what="metadata to settle")
    assert describe(admin, topic)["retention.ms"] == ("86400000", DYNAMIC_TOPIC)

    r = cli(bootstrap, "list")
    assert r.returncode == 0, r.stderr
    assert topic in r.stdout.split()

    # creating it again fails (non-zero exit), and says why
    r = cli(bootstrap, "create", topic)
    assert r.returncode != 0
    assert "TopicAlreadyExists" in (r.stderr + r.stdout)

    r = cli(bootstrap, "delete", topic)
    assert r.returncode == 0, r.stderr
    assert topic not in cli(bootstrap, "list").stdout.split()
    wait_until(lambda: partition_count(bootstrap, topic) == -ke.UnknownTopicOrPartitionError.errno, timeout=TIMEOUT, what="metadata to settle")


def test_cli_alter_partitions(shared_broker):
    bootstrap = shared_broker.bootstrap
    topic = "adm-cli-alter"
    assert cli(bootstrap, "create", topic, "--partitions", "2").returncode == 0
    r = cli(bootstrap, "alter", topic, "--partitions", "4")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: partition_count(bootstrap, topic) == 4, timeout=TIMEOUT, what="metadata to settle")
    r = cli(bootstrap, "alter", topic, "--partitions", "1")
    assert r.returncode != 0
    wait_until(lambda: partition_count(bootstrap, topic) == 4, timeout=TIMEOUT, what="metadata to settle")


def test_cli_describe(shared_broker):
    bootstrap = shared_broker.bootstrap
    topic = "adm-cli-describe"
    assert cli(bootstrap, "create", topic, "--partitions", "3").returncode == 0
    r = cli(bootstrap, "describe", topic)
    assert r.returncode == 0, r.stderr
    assert f"Topic: {topic}" in r.stdout and "PartitionCount: 3" in r.stdout
    lines = [line for line in r.stdout.splitlines() if "\tPartition: " in line]
    assert sorted(line.split("Partition: ")[1].split()[0] for line in lines) == ["0", "1", "2"]
    assert all("Leader: 1" in line for line in lines)
