"""Share groups on a three-node cluster (KIP-932): kill -9 of the node that leads the topic partition (the
share-partition leader, which holds the in-flight records) and then of the share coordinator's node (which holds
the persisted state). confluent-kafka's ShareConsumer goes on with the survivors; every record is delivered,
and no record that was accepted before a kill is delivered again after it (records in flight at the kill may be:
at-least-once, as Kafka)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from minikafka.protocol.messages import DescribeShareGroupOffsetsRequest

from tests.support.cluster_harness import Cluster, running
from tests.support.group_helpers import produce
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

CONFIG = {"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "400", "group.initial.rebalance.delay.ms": "0",
          "offsets.topic.num.partitions": "3", "share.coordinator.state.topic.num.partitions": "3",
          "share.coordinator.write.timeout.ms": "3000"}
TOPIC, GROUP = "shared", "sg-failover"


def _leader(cluster: Cluster, node: int) -> int:
    with RawClient(cluster.nodes[node].bootstrap, timeout=3.0) as c:
        md = metadata_raw(c, [TOPIC])
    return md.topics[0].partitions[0].leader_id


def _share_coordinator(cluster: Cluster, node: int, key: str) -> int:
    with RawClient(cluster.nodes[node].bootstrap, timeout=3.0) as c:
        resp = c.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6, FindCoordinatorResponse)
    return resp.coordinators[0].node_id if resp.coordinators[0].error_code == 0 else -1


def _start_offset(cluster: Cluster, consumer: ShareConsumer) -> int:
    """The share-partition's start offset as the group's coordinator reports it (-1: none yet); polls once."""
    assert not [m for m in consumer.poll(0.2) if m.error() is None]
    Group = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    for n in cluster.brokers:
        try:
            with RawClient(cluster.nodes[n].bootstrap, timeout=3.0) as c:
                resp = c.request(DescribeShareGroupOffsetsRequest(groups=[Group(group_id=GROUP, topics=None)]), 1)
        except OSError:
            continue
        g = resp.groups[0]
        if g.error_code == 0:
            starts = [p.start_offset for t in g.topics for p in t.partitions]
            return starts[0] if starts else -1
    return -1


def _consume(consumer: ShareConsumer, accepted: set[bytes], delivered: list[bytes], count: int,
             deadline_s: float = 60) -> None:
    """Poll, accepting each record, until `count` more were accepted."""
    goal = len(accepted) + count
    end = time.monotonic() + deadline_s
    while len(accepted) < goal and time.monotonic() < end:
        msgs = consumer.poll(1.0)
        for m in msgs:
            if m.error() is not None:
                continue
            delivered.append(m.value())
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        if msgs:
            try:
                consumer.commit_sync()
            except Exception:  # a node died under the commit: its records come back and are accepted again
                continue
            accepted.update(m.value() for m in msgs if m.error() is None)


def test_share_group_survives_leader_and_coordinator_kills(tmp_path):
    with running(Cluster(tmp_path, config=CONFIG)) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        first = cluster.brokers[0]
        wait_until(lambda: _leader(cluster, first) >= 0, 30, 0.3, "the topic's leader")
        consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([TOPIC])
        accepted: set[bytes] = set()
        delivered: list[bytes] = []
        try:
            # the share-partition starts at the log end (share.auto.offset.reset=latest) once it is fetched from
            wait_until(lambda: _start_offset(cluster, consumer) == 0, 60, 0.1, "the share-partition initialized")
            values = produce(cluster.bootstrap, TOPIC, 1, 300)
            _consume(consumer, accepted, delivered, 100)
            before_first = set(accepted)
            assert len(before_first) >= 100
            leader = _leader(cluster, first)
            mark1 = len(delivered)
            cluster.kill(leader)  # the share-partition leader
            survivor = next(n for n in cluster.brokers if n != leader)
            _consume(consumer, accepted, delivered, 100)
            before_second = set(accepted)
            tid = metadata_raw(RawClient(cluster.nodes[survivor].bootstrap), [TOPIC], version=12).topics[0].topic_id
            key = f"{GROUP}:{_kafka_uuid(tid)}:0"
            coordinator = _share_coordinator(cluster, survivor, key)
            cluster.restart(leader)
            wait_until(lambda: _leader(cluster, survivor) >= 0, 30, 0.3, "a leader")
            assert coordinator >= 0
            mark2 = len(delivered)
            cluster.kill(coordinator)  # the share coordinator of the share-partition
            _consume(consumer, accepted, delivered, len(values) - len(accepted), deadline_s=90)
        finally:
            consumer.close()
        assert accepted == set(values)
        # accepted before a kill: never delivered again
        assert not set(delivered[mark1:]) & before_first
        assert not set(delivered[mark2:]) & before_second


def _kafka_uuid(u) -> str:
    import base64
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()
