"""AlterReplicaLogDirs in a three-node cluster whose nodes have two log dirs each: the move is local to
the broker asked (the leader's replica and a follower's), while an idempotent producer writes with
acks=all; every acknowledged record is consumed back once, the replicas stay in the ISR. (The controller's
record of each replica's dir, AssignReplicasToDirs: test_cluster_dir_assignments.py.)"""
from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from tests.integration.admin.test_alter_replica_log_dirs import NONE, UNKNOWN_TOPIC_OR_PARTITION, alter, where
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, confluent_consume, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, size=3)
    for n, node in c.nodes.items():
        node.config["log.dirs"] = f"{tmp_path}/node{n}/a,{tmp_path}/node{n}/b"
    with running(c) as c:
        yield c


def _isr(c: Cluster, topic: str) -> tuple[int, tuple]:
    with RawClient(c.nodes[1].bootstrap, timeout=5) as cl:
        (t,) = metadata_raw(cl, [topic], version=12).topics
    (p,) = t.partitions
    return p.leader_id, tuple(sorted(p.isr_nodes))


def test_moves_on_the_leader_and_a_follower_while_producing(cluster, tmp_path):
    c = cluster
    topic = "jbod-moves"
    C = CreateTopicsRequest.CreatableTopic
    with RawClient(c.nodes[1].bootstrap, timeout=40) as cl:
        resp = cl.request(CreateTopicsRequest(topics=[C(name=topic, num_partitions=-1, replication_factor=-1,
                                                        configs=[], assignments=[C.CreatableReplicaAssignment(
                                                            partition_index=0, broker_ids=[1, 2, 3])])],
                                              timeout_ms=30000, validate_only=False), 7, CreateTopicsResponse)
    assert resp.topics[0].error_code == 0, resp
    wait_until(lambda: _isr(c, topic)[1] == (1, 2, 3), timeout=30, what="the ISR")
    leader = _isr(c, topic)[0]
    follower = next(n for n in c.ids if n != leader)
    errors: list = []
    sent = 6000

    def produce(start: int) -> None:
        p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "batch.size": 65536})
        for i in range(start, start + sent // 2):
            p.produce(topic, f"{i:08d}".encode() + b"y" * 500, partition=0,
                      on_delivery=lambda err, _m: err and errors.append(err))
            if i % 200 == 0:
                p.poll(0)
        assert p.flush(90) == 0

    produce(0)
    writer = threading.Thread(target=produce, args=(sent // 2,))
    writer.start()
    for n in (leader, follower):
        bs = c.nodes[n].bootstrap
        home = where(bs, topic)[(0, False)]
        dest = next(f"{tmp_path}/node{n}/{d}" for d in "ab" if not home.endswith(f"/{d}"))
        assert alter(bs, {dest: {topic: [0]}}) == {(topic, 0): NONE}
        wait_until(lambda bs=bs, dest=dest: where(bs, topic) == {(0, False): dest}, timeout=60,
                   what=f"node {n}'s move")
    writer.join(120)
    assert errors == []
    assert alter(c.nodes[1].bootstrap, {f"{tmp_path}/node1/a": {topic: [5]}}) == {(topic, 5): UNKNOWN_TOPIC_OR_PARTITION}
    wait_until(lambda: _isr(c, topic)[1] == (1, 2, 3), timeout=30, what="the ISR after the moves")
    got = confluent_consume(c.bootstrap, topic, {0: sent}, timeout=60)[0]
    values = sorted(int(m.value()[:8]) for m in got)
    assert values == list(range(sent))
