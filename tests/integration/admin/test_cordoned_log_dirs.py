"""cordoned.log.dirs (KIP-1066) as a dynamic broker config on a single node, as Kafka 4.3.1 answers it:
DescribeLogDirs v5 shows the dir cordoned; with every dir cordoned, CreateTopics and CreatePartitions are
INVALID_REPLICATION_FACTOR with Kafka's message and auto-creation finds no topic; a value naming no log dir,
or `*` with other entries, is INVALID_REQUEST. Black-box (also runs with --broker=kafka); the config is
removed at the end."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic
from kafka.protocol.admin import (CreatePartitionsRequest, CreateTopicsRequest, DescribeLogDirsRequest,
                                  DescribeLogDirsResponse)

from tests.support.helpers import RawClient, metadata_raw, wait_broker_connections_closed, wait_topic_ready, wait_until

INVALID_REPLICATION_FACTOR, UNKNOWN_TOPIC_OR_PARTITION = 38, 3
ALL_CORDONED = "All brokers are currently fenced, or have all their log directories cordoned."


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


def _alter(bootstrap: str, broker_id: int, value: str | None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    res = ConfigResource(ConfigResource.Type.BROKER, str(broker_id), incremental_configs=[
        ConfigEntry("cordoned.log.dirs", value or "", incremental_operation=op)])
    admin.incremental_alter_configs([res])[res].result(30)


def _cordoned(bootstrap: str) -> list[bool]:
    with RawClient(bootstrap) as c:
        return [r.is_cordoned for r in c.request(DescribeLogDirsRequest(topics=None), 5, DescribeLogDirsResponse).results]


def test_every_dir_cordoned_refuses_new_partitions(shared_broker):
    bs = shared_broker.bootstrap
    with RawClient(bs) as c:
        (me,) = [b.node_id for b in metadata_raw(c, [], version=12).brokers]
    existing = f"cord-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(existing, 1, 1)])[existing].result(30)
    wait_topic_ready(bs, existing, 1)
    assert not any(_cordoned(bs))
    _alter(bs, me, "*")
    try:
        wait_until(lambda: all(_cordoned(bs)), timeout=15, what="every log dir cordoned")
        T = CreateTopicsRequest.CreatableTopic
        P = CreatePartitionsRequest.CreatePartitionsTopic
        with RawClient(bs) as c:
            (t,) = c.request(CreateTopicsRequest(topics=[T(name=f"cord-new-{uuid.uuid4().hex[:6]}", num_partitions=1,
                                                           replication_factor=1, assignments=[], configs=[])],
                                                 timeout_ms=30000), 7).topics
            assert (t.error_code, t.error_message) == (
                INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition 1 time(s): {ALL_CORDONED}")
            (r,) = c.request(CreatePartitionsRequest(topics=[P(name=existing, count=3, assignments=None)],
                                                     timeout_ms=30000, validate_only=False), 3).results
            assert (r.error_code, r.error_message) == (INVALID_REPLICATION_FACTOR, ALL_CORDONED)
            auto = f"cord-auto-{uuid.uuid4().hex[:6]}"
            (m,) = metadata_raw(c, [auto], version=12, auto_create=True).topics
            assert (m.name, m.error_code) == (auto, UNKNOWN_TOPIC_OR_PARTITION)
            (e,) = metadata_raw(c, [existing], version=12).topics  # what exists is still served
            assert e.error_code == 0 and len(e.partitions) == 1
    finally:
        _alter(bs, me, None)
    wait_until(lambda: not any(_cordoned(bs)), timeout=15, what="no log dir cordoned")
    admin.create_partitions([NewPartitions(existing, 2)])[existing].result(30)


@pytest.mark.parametrize("value, message", [
    ("/no/such/dir", "All entries in cordoned.log.dirs must be present in log.dirs or log.dir. Missing entries : "
                     "/no/such/dir"),
    ("*,/no/such/dir", "When cordoned.log.dirs is set to *, it must not contain other values"),
])
def test_a_value_naming_no_log_dir_is_refused(shared_broker, value, message):
    with RawClient(shared_broker.bootstrap) as c:
        (me,) = [b.node_id for b in metadata_raw(c, [], version=12).brokers]
    with pytest.raises(KafkaException) as exc:
        _alter(shared_broker.bootstrap, me, value)
    err = exc.value.args[0]
    assert err.name() == "INVALID_REQUEST" and message in err.str(), err.str()
    assert not any(_cordoned(shared_broker.bootstrap))
