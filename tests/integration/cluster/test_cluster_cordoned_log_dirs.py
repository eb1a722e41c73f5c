"""cordoned.log.dirs (KIP-1066) in a three-node cluster, as Kafka 4.3.1 does it: a broker sends the ids of
its cordoned log dirs in its heartbeats (BrokerHeartbeat v2 CordonedLogDirs), the controller keeps them in
the broker's registration and its replica placement leaves out a broker whose every log dir is cordoned.
A dynamic change (IncrementalAlterConfigs on the broker) reaches the controller with the next heartbeat;
with every broker cordoned, CreateTopics and CreatePartitions are INVALID_REPLICATION_FACTOR with Kafka's
message; a static config survives a restart."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest

from tests.integration.admin.test_cordoned_log_dirs import ALL_CORDONED, INVALID_REPLICATION_FACTOR, _alter, _cordoned
from tests.support.cluster_harness import Cluster, brokers, running
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, size=3)
    for n, node in c.nodes.items():
        node.config["log.dirs"] = f"{tmp_path}/node{n}/logs"
    with running(c) as c:
        yield c


def _replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    with RawClient(bootstrap.split(",")[0], timeout=5) as cl:
        (t,) = metadata_raw(cl, [topic], version=12).topics
    return {p.partition_index: list(p.replica_nodes) for p in t.partitions}


def _create(bootstrap: str, name: str, partitions: int, rf: int) -> tuple[int, str | None]:
    T = CreateTopicsRequest.CreatableTopic
    with RawClient(bootstrap.split(",")[0], timeout=40) as c:
        (t,) = c.request(CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=rf,
                                                       assignments=[], configs=[])], timeout_ms=30000), 7).topics
    return t.error_code, t.error_message


def _add_partitions(bootstrap: str, name: str, count: int) -> tuple[int, str | None]:
    P = CreatePartitionsRequest.CreatePartitionsTopic
    with RawClient(bootstrap.split(",")[0], timeout=40) as c:
        (r,) = c.request(CreatePartitionsRequest(topics=[P(name=name, count=count, assignments=None)],
                                                 timeout_ms=30000, validate_only=False), 3).results
    return r.error_code, r.error_message


def _placed_without(c: Cluster, cordoned: set[int], name: str, partitions: int = 12, rf: int = 2) -> dict:
    """Create `name` once the controller knows the cordoned brokers: a topic placed on a cordoned broker
    (a heartbeat not yet there) is deleted and created again."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    attempt = [0]

    def placed() -> bool:
        attempt[0] += 1
        topic = f"{name}-{attempt[0]}"
        try:
            admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(30)
        except KafkaException as exc:  # a broker uncordoned a moment ago: not yet known to the controller
            assert exc.args[0].code() == INVALID_REPLICATION_FACTOR, exc
            return False
        wait_until(lambda: len(_replicas(c.bootstrap, topic)) == partitions, timeout=15, what=f"{topic}'s partitions")
        found = _replicas(c.bootstrap, topic)
        if any(set(r) & cordoned for r in found.values()):
            admin.delete_topics([topic])[topic].result(30)
            return False
        placed.result = (topic, found)
        return True
    wait_until(placed, timeout=20, what=f"a topic placed without brokers {sorted(cordoned)}")
    return placed.result


def test_cordoned_broker_gets_no_new_replica(cluster, tmp_path):
    c = cluster
    node2 = c.nodes[2].bootstrap
    _alter(node2, 2, f"{tmp_path}/node2/logs")  # node 2's only log dir, dynamically
    wait_until(lambda: _cordoned(node2) == [True], timeout=15, what="node 2's dir cordoned")
    topic, found = _placed_without(c, {2}, "cordon-two")
    assert all(len(r) == 2 and set(r) <= {1, 3} for r in found.values()), found
    assert {r[0] for r in found.values()} == {1, 3}  # both others lead some

    _alter(c.nodes[1].bootstrap, 1, "*")
    _alter(c.nodes[3].bootstrap, 3, "*")
    wait_until(lambda: _create(c.bootstrap, f"cordon-early-{uuid.uuid4().hex[:6]}", 1, 1)[0]
               == INVALID_REPLICATION_FACTOR, timeout=15,
               what="CreateTopics refused with every broker cordoned")
    assert _create(c.bootstrap, "cordon-none", 3, 1) == (
        INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition 1 time(s): {ALL_CORDONED}")
    assert _add_partitions(c.bootstrap, topic, 14) == (INVALID_REPLICATION_FACTOR, ALL_CORDONED)
    assert len(_replicas(c.bootstrap, topic)) == 12  # what exists is untouched

    _alter(node2, 2, None)  # node 2 uncordoned: the only broker placement may use
    wait_until(lambda: _add_partitions(c.bootstrap, topic, 13) == (INVALID_REPLICATION_FACTOR, (
        "The target replication factor of 2 cannot be reached because only 1 broker(s) are registered or some "
        "brokers have all their log directories cordoned.")), timeout=15, what="only node 2 usable")
    only, found = _placed_without(c, {1, 3}, "cordon-only-two", partitions=4, rf=1)
    assert found == {i: [2] for i in range(4)}

    _alter(c.nodes[1].bootstrap, 1, None)
    _alter(c.nodes[3].bootstrap, 3, None)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    wait_until(lambda: _add_partitions(c.bootstrap, topic, 16) == (0, None), timeout=15, what="partitions added")
    _, found = _placed_without(c, set(), "cordon-all-back", partitions=6, rf=3)
    assert all(sorted(r) == [1, 2, 3] for r in found.values())
    admin.create_partitions([NewPartitions(only, 6)])[only].result(30)


def test_static_config_survives_a_restart(cluster):
    c = cluster
    c.kill(3)
    c.nodes[3].config["cordoned.log.dirs"] = "*"
    c.restart(3)
    wait_until(lambda: brokers(c, 1) == {1, 2, 3}, timeout=30, what="node 3 back")
    assert _cordoned(c.nodes[3].bootstrap) == [True]
    _, found = _placed_without(c, {3}, "cordon-static", partitions=9, rf=2)
    assert all(set(r) <= {1, 2} for r in found.values())
