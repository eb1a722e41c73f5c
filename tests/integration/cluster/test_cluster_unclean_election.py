"""Unclean leader election on a three-node cluster. A partition whose only in-sync replica is dead
stays leaderless (unclean.leader.election.enable is false by default; with eligible leader replicas, as
Kafka 4.3, its ISR is empty and the dead replica eligible) even when another replica is alive;
`kafka-leader-election --election-type unclean` makes the live replica the leader (what only the dead
one had is lost, as in Kafka), and a topic with unclean.leader.election.enable=true gets one on its own.
The old leader, back, truncates what the new one does not have and rejoins the ISR."""
from __future__ import annotations

import sys
import time

import pytest
from confluent_kafka import Producer
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from tests.support.cluster_harness import Cluster
from tests.conftest import ROOT
from tests.support.helpers import RawClient, confluent_consume, wait_until
from tests.integration.cluster.test_cluster_reassignment import (_alter, _create, _log_size, _partition,
                                                         cluster)  # noqa: F401 - the fixture

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]


def _produce(c: Cluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "message.timeout.ms": 20000})
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0


def _enable_unclean(c: Cluster, n: int, topic: str) -> None:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    with RawClient(c.nodes[n].bootstrap, timeout=40) as cl:
        resp = cl.request(IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
            resource_type=2, resource_name=topic, configs=[R.AlterableConfig(
                name="unclean.leader.election.enable", config_operation=0, value="true")])]),
            1, IncrementalAlterConfigsResponse)
    assert resp.responses[0].error_code == 0, resp


def test_unclean_election_on_request_and_by_config(cluster):
    controller, _ = cluster.agreed_leader(cluster.ids)
    a = next(n for n in cluster.ids if n != controller)  # the replica that dies (the quorum keeps two)
    b = next(n for n in cluster.ids if n not in (controller, a))
    _create(cluster, "manual", [a])
    _create(cluster, "auto", [a])
    _produce(cluster, "manual", [b"lost-%d" % i for i in range(50)])
    _produce(cluster, "auto", [b"lost-%d" % i for i in range(50)])
    cluster.kill(a)
    wait_until(lambda: _partition(cluster, b, "manual")[0] == -1, timeout=15, what="manual-0 leaderless")
    # b becomes a replica (an added one: empty, outside the ISR); the partitions stay leaderless
    for topic in ("manual", "auto"):
        assert _alter(cluster, b, topic, [b, a]).error_code == 0
    time.sleep(2.0)  # several of the controller's unclean-election scans
    # eligible leader replicas (KIP-966, on in Kafka 4.3): the ISR is empty, a is in the ELR (not in Metadata)
    assert _partition(cluster, b, "manual")[::2] == (-1, ())
    _enable_unclean(cluster, b, "auto")
    wait_until(lambda: _partition(cluster, b, "auto")[::2] == (b, (b,)), timeout=15,
               what="auto-0 led by the live replica after the config change")
    assert _partition(cluster, b, "manual")[0] == -1  # its topic does not allow it
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    lab.fetch()
    res = lab.run_tool("kafka-leader-election", ["--bootstrap-server", cluster.nodes[b].bootstrap,
                                                 "--election-type", "unclean", "--topic", "manual",
                                                 "--partition", "0"], timeout=90)
    assert res.returncode == 0 and "Successfully completed leader election (UNCLEAN) for partitions manual-0" \
        in res.stdout, res.stdout + res.stderr[-2000:]
    assert _partition(cluster, b, "manual")[::2] == (b, (b,))
    again = lab.run_tool("kafka-leader-election", ["--bootstrap-server", cluster.nodes[b].bootstrap,
                                                   "--election-type", "unclean", "--topic", "manual",
                                                   "--partition", "0"], timeout=90)
    assert "Valid replica already elected for partitions manual-0" in again.stdout, again.stdout + again.stderr
    for topic in ("manual", "auto"):
        _produce(cluster, topic, [b"kept-%d" % i for i in range(10)])
        got = confluent_consume(cluster.bootstrap, topic, {0: 10}, timeout=30)[0]
        assert [m.value() for m in got] == [b"kept-%d" % i for i in range(10)]  # the unclean leader's log only
    cluster.restart(a)  # its 50 records diverge from the new leader's log: truncated, then it catches up
    for topic in ("manual", "auto"):
        wait_until(lambda topic=topic: set(_partition(cluster, b, topic)[2]) == {a, b}, timeout=30,
                   what=f"{topic}-0: the old leader back in the ISR")
        wait_until(lambda topic=topic: _log_size(cluster, a, topic) == _log_size(cluster, b, topic), timeout=15,
                   what=f"{topic}-0: the same log on both replicas")
        assert not _partition(cluster, a, topic)[0] == -1
