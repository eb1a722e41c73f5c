"""`minikafka.testing.MiniKafkaCluster` and the `minikafka_cluster` fixture as a user's test uses them:
three nodes, a replicated topic, the leader killed -9 and paused; the producer's acknowledged records
are all read back, and a killed node comes back as a replica on its own data."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.helpers import wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]


def produce(bootstrap: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 30000})
    failed: list = []
    for v in values:
        p.produce("orders", v.encode(), partition=0, on_delivery=lambda err, _m: err and failed.append(err))
    assert p.flush(60) == 0 and not failed, failed


def read(bootstrap: str) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"api-{time.time()}", "enable.auto.commit": False})
    c.assign([TopicPartition("orders", 0, 0)])
    out: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(out) < 300:
        out += [m.value().decode() for m in c.consume(500, 0.5) if m.error() is None]
    c.close()
    return out


def test_the_cluster_fixture_survives_a_killed_and_a_paused_leader(minikafka_cluster):
    cluster = minikafka_cluster
    assert cluster.ids == [1, 2, 3] and len(cluster.bootstrap_servers.split(",")) == 3
    cluster.create_topic("orders", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    wait_until(lambda: cluster.leader_of("orders") in cluster.ids, what="a leader for orders-0")
    produce(cluster.bootstrap_servers, [f"a{i}" for i in range(100)])
    first = cluster.leader_of("orders")
    cluster.kill(first)
    produce(cluster.bootstrap_servers, [f"b{i}" for i in range(100)])  # the producer fails over on its own
    second = cluster.leader_of("orders", via=next(n for n in cluster.ids if n != first))
    assert second not in (first, -1)
    cluster.start_node(first)
    cluster.pause(second)
    try:
        produce(cluster.bootstrap_servers, [f"c{i}" for i in range(100)])
    finally:
        cluster.resume(second)
    assert read(cluster.bootstrap_servers) == [f"{k}{i}" for k in "abc" for i in range(100)]
