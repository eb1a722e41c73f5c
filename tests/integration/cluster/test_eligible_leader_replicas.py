"""Eligible leader replicas (KIP-966) on a cluster of three controllers (combined nodes 1-3) and two
broker-only nodes (4, 5), so that three replicas can be down while the quorum stays up. A topic with RF 3
on [4, 5, x] and min.insync.replicas=2: x's clean stop takes the ISR below min ISR, so x becomes an
eligible leader replica (ELR); the last ISR member killed -9 leaves the ISR empty with ELR [4, x] and
LastKnownElr [4], as Kafka's `kafka-topics --describe` and DescribeTopicPartitions show; x, back, is
elected from the ELR and serves every acks=all record ever acknowledged; the ELR survives the loss of
the active controller, and is cleared once the ISR is back at min.insync.replicas."""
from __future__ import annotations

import re
import sys

import pytest
from confluent_kafka import KafkaError, Producer
from kafka.protocol.admin import (CreateTopicsRequest, CreateTopicsResponse, DescribeTopicPartitionsRequest,
                                  DescribeTopicPartitionsResponse)

from tests.conftest import ROOT
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, confluent_consume, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

CONFIG = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "300",
          "replica.lag.time.max.ms": "3000"}
TOPIC = "elr"


@pytest.fixture
def cluster(tmp_path):
    with running(Cluster(tmp_path, size=3, broker_only=2, config=CONFIG), timeout=40) as c:
        yield c


def _dtp(c: Cluster, n: int) -> tuple[int, list[int], list[int], list[int]]:
    """(leader, isr, elr, last known elr) of elr-0 as node n answers DescribeTopicPartitions."""
    Q = DescribeTopicPartitionsRequest
    with RawClient(c.nodes[n].bootstrap, timeout=5) as cl:
        resp = cl.request(Q(topics=[Q.TopicRequest(name=TOPIC)], response_partition_limit=10, cursor=None), 0,
                          DescribeTopicPartitionsResponse)
    p = resp.topics[0].partitions[0]
    return p.leader_id, list(p.isr_nodes), sorted(p.eligible_leader_replicas or []), list(p.last_known_elr or [])


def _state_on(c: Cluster, nodes: list[int], want: tuple, what: str) -> None:
    def agreed():
        try:
            return all(_dtp(c, n) == want for n in nodes)
        except (OSError, IndexError):
            return False
    wait_until(agreed, timeout=30, what=what)


def _describe_tool(c: Cluster, n: int) -> str:
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    lab.fetch()
    res = lab.run_tool("kafka-topics", ["--bootstrap-server", c.nodes[n].bootstrap, "--describe", "--topic", TOPIC],
                       timeout=90)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    return res.stdout


def _produce(c: Cluster, n: int, values: list[bytes]) -> list[bytes]:
    """acks=all; the values acknowledged."""
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": c.nodes[n].bootstrap, "acks": "all", "message.timeout.ms": 6000,
                         "retries": 0, "enable.idempotence": False})
    for v in values:
        producer.produce(TOPIC, v, partition=0,
                         on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
    producer.flush(20)
    return acked


def test_isr_below_min_isr_then_leader_from_the_elr(cluster):
    controller, _ = cluster.agreed_leader([1, 2, 3])
    x = next(n for n in (1, 2, 3) if n != controller)  # the voter replica; the quorum keeps two
    C = CreateTopicsRequest.CreatableTopic
    with RawClient(cluster.nodes[4].bootstrap, timeout=40) as cl:
        resp = cl.request(CreateTopicsRequest(topics=[C(
            name=TOPIC, num_partitions=-1, replication_factor=-1,
            configs=[C.CreatableTopicConfig(name="min.insync.replicas", value="2")],
            assignments=[C.CreatableReplicaAssignment(partition_index=0, broker_ids=[4, 5, x])])],
            timeout_ms=30000, validate_only=False), 7, CreateTopicsResponse)
    assert resp.topics[0].error_code == 0, resp
    _state_on(cluster, [4, x], (4, [4, 5, x], [], []), "elr-0 on every replica, all in sync")
    acked = _produce(cluster, 4, [b"all-%d" % i for i in range(50)])
    assert len(acked) == 50

    cluster.nodes[5].stop()  # clean: ISR [4, x], still at min ISR: no ELR
    _state_on(cluster, [4, x], (4, [4, x], [], []), "5 out of the ISR")
    acked += _produce(cluster, 4, [b"two-%d" % i for i in range(50)])
    assert len(acked) == 100

    cluster.nodes[x].stop()  # clean: the ISR [4] is below min.insync.replicas: x becomes eligible
    _state_on(cluster, [4], (4, [4], [x], []), "x in the ELR")
    out = _describe_tool(cluster, 4)
    assert re.search(rf"Topic: {TOPIC}\s+Partition: 0\s+Leader: 4\s+Replicas: 4,5,{x}\s+Isr: 4\s+Elr: {x}\s+"
                     r"LastKnownElr: ?\s*$", out, re.M), out
    errors: list = []  # nothing is acknowledged with one in-sync replica
    refused = Producer({"bootstrap.servers": cluster.nodes[4].bootstrap, "acks": "all", "message.timeout.ms": 3000,
                        "retries": 0, "enable.idempotence": False})
    refused.produce(TOPIC, b"refused", partition=0, on_delivery=lambda err, msg: errors.append(err))
    refused.flush(10)
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS], errors

    cluster.kill(4)  # the last ISR member crashes: an empty ISR, ELR [4, x], LastKnownElr [4]
    other = next(n for n in (1, 2, 3) if n != x)
    _state_on(cluster, [other], (-1, [], sorted([4, x]), [4]), "empty ISR, ELR [4, x]")
    out = _describe_tool(cluster, other)
    elr = ",".join(str(b) for b in sorted([4, x]))
    assert re.search(rf"Topic: {TOPIC}\s+Partition: 0\s+Leader: none\s+Replicas: 4,5,{x}\s+Isr: ?\s+Elr: {elr}\s+"
                     r"LastKnownElr: 4\s*$", out, re.M), out

    cluster.restart(x)  # clean shutdown before: still eligible, elected from the ELR
    _state_on(cluster, [other, x], (x, [x], [4], []), "x leads, out of the ELR")
    got = confluent_consume(cluster.nodes[x].bootstrap, TOPIC, {0: len(acked)}, timeout=30)[0]
    values = [m.value() for m in got]
    assert values[:len(acked)] == acked  # every acknowledged record, in order

    # the active controller dies: its successor has the same ELR and acts on it
    controller, epoch = cluster.agreed_leader([1, 2, 3])
    if controller == x:
        pytest.fail("the restarted replica became the active controller; the test expects another one")
    cluster.kill(controller)
    survivors = [n for n in (1, 2, 3) if n != controller]
    cluster.agreed_leader(survivors, timeout=20, newer_than=epoch)
    _state_on(cluster, survivors, (x, [x], [4], []), "the ELR after the controller failover")
    cluster.restart(4)  # killed -9 before: an unclean shutdown, out of the ELR; it catches up, joins the ISR
    cluster.restart(5)
    cluster.restart(controller)
    wait_until(lambda: (lambda s: s[0] == x and len(s[1]) >= 2 and s[2] == [] and s[3] == [])(_dtp(cluster, x)),
               timeout=40, what="the ISR back at min.insync.replicas, ELR cleared")
    acked2 = _produce(cluster, x, [b"after-%d" % i for i in range(10)])
    assert len(acked2) == 10
