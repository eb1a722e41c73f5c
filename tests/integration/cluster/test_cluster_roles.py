"""Separate process roles. Broker-only nodes (process.roles=broker) beside three combined nodes: a node
outside controller.quorum.voters replicates the metadata log as an observer (DescribeQuorum lists it
among the observers, never among the voters), registers as a broker, hosts and leads partitions,
forwards topic changes to the active controller, and keeps working when the controller moves; killed -9
its leaderships move to an in-sync replica and it rejoins the ISR when back. Then Kafka's classic
layout: three controller-only nodes (process.roles=controller, only a CONTROLLER listener) and two
brokers: the controllers never register as brokers or host partitions, clients see the brokers only."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from tests.support.helpers import RawClient, confluent_consume, metadata_raw, wait_until
from tests.integration.cluster.test_cluster_reassignment import CONFIG, _create, _partition
from tests.support.cluster_harness import Cluster, running
from tests.support.cluster_harness import brokers as _brokers
from tests.integration.cluster.test_cluster_unclean_election import _produce

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

# an observer learns of a new quorum leader only when its fetches time out (no BeginQuorumEpoch reaches
# it): the broker session outlasts that (Kafka's defaults: fetch timeout 2 s, session 9 s)
ROLES_CONFIG = {**CONFIG, "broker.session.timeout.ms": "3000"}


@pytest.fixture
def cluster(tmp_path):
    with running(Cluster(tmp_path, config=ROLES_CONFIG, broker_only=1)) as c:
        yield c


def _quorum(c: Cluster, leader: int) -> tuple[list[int], list[int]]:
    """(voters, observers) as the quorum leader describes them."""
    with RawClient(f"127.0.0.1:{c.controller_ports[leader]}", timeout=5) as cl:
        resp = cl.request(DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.TopicData.PartitionData(
                partition_index=0)])]), 2, DescribeQuorumResponse)
    p = resp.topics[0].partitions[0]
    return sorted(v.replica_id for v in p.current_voters), sorted(o.replica_id for o in p.observers)


def test_a_broker_only_node_observes_the_quorum_and_serves_partitions(cluster):
    leader, _ = cluster.agreed_leader(cluster.voters)
    wait_until(lambda: _quorum(cluster, leader) == ([1, 2, 3], [4]), timeout=10, what="node 4 an observer")
    _create(cluster, "on-four", [4, 1])
    assert _partition(cluster, 4, "on-four")[0] == 4
    values = [b"v%d" % i for i in range(100)]
    _produce(cluster, "on-four", values)
    got = confluent_consume(cluster.nodes[4].bootstrap, "on-four", {0: 100}, timeout=30)[0]
    assert [m.value() for m in got] == values
    cluster.kill(leader)  # a new controller; node 4 follows it and its topic changes go there
    others = [v for v in cluster.voters if v != leader]
    new_leader, _ = cluster.agreed_leader(others, timeout=20)
    _create(cluster, "after", [4, new_leader], via=4, on=[4, *others])
    assert _partition(cluster, 4, "after")[0] == 4
    cluster.restart(leader)  # a new incarnation: out of every ISR at registration, back once caught up
    wait_until(lambda: leader in _brokers(cluster, leader), timeout=30, what="the restarted node serving")
    wait_until(lambda: set(_partition(cluster, leader, "on-four")[2]) == {1, 4}, timeout=30,
               what="on-four ISR 4, 1")
    cluster.kill(4)  # its leaderships move to the other in-sync replica
    wait_until(lambda: _partition(cluster, 1, "on-four")[0] == 1, timeout=15, what="on-four led by node 1")
    assert _partition(cluster, 1, "after")[0] == new_leader
    _produce(cluster, "on-four", [b"w"])
    cluster.restart(4)
    wait_until(lambda: set(_partition(cluster, 1, "on-four")[2]) == {1, 4}, timeout=30, what="node 4 back in the ISR")
    assert 4 in _quorum(cluster, cluster.agreed_leader(cluster.voters, timeout=20)[0])[1]


@pytest.fixture
def split_cluster(tmp_path):
    with running(Cluster(tmp_path, config=ROLES_CONFIG, broker_only=2, controller_only=True)) as c:
        yield c


def test_controller_only_nodes_and_broker_only_nodes(split_cluster):
    c = split_cluster
    leader, _ = c.agreed_leader(c.voters)
    wait_until(lambda: _quorum(c, leader) == ([1, 2, 3], [4, 5]), timeout=10, what="brokers 4 and 5 observe")
    with RawClient(c.nodes[4].bootstrap, timeout=5) as cl:
        md = metadata_raw(cl)
    assert sorted(b.node_id for b in md.brokers) == [4, 5] and md.controller_id in (4, 5)
    _create(c, "split", [4, 5], via=4, on=c.brokers)
    values = [b"s%d" % i for i in range(100)]
    _produce(c, "split", values)
    assert [m.value() for m in confluent_consume(c.bootstrap, "split", {0: 100}, timeout=30)[0]] == values
    assert not any((c.nodes[n].data_dir / "split-0").exists() for n in c.voters)  # controllers hold no replicas
    c.kill(leader)
    others = [v for v in c.voters if v != leader]
    c.agreed_leader(others, timeout=20)
    _create(c, "split-after", [5, 4], via=4, on=c.brokers)
    c.kill(5)
    wait_until(lambda: _partition(c, 4, "split")[0] == 4, timeout=15, what="split-0 led by broker 4")
    _produce(c, "split", [b"more"])
    got = confluent_consume(c.nodes[4].bootstrap, "split", {0: 101}, timeout=30)[0]
    assert got[-1].value() == b"more"


def test_one_controller_only_node_and_two_brokers(tmp_path):
    """A lone controller-only voter (process.roles=controller, controller.quorum.voters=1@...) is a quorum
    of one, as in Kafka (a common development layout), not a single-node broker: brokers 2 and 3 register
    with it, serve a replicated topic, and carry on through a kill -9 and restart of the controller."""
    with running(Cluster(tmp_path, size=1, config=ROLES_CONFIG, broker_only=2, controller_only=True)) as c:
        wait_until(lambda: _brokers(c, 2) == {2, 3}, timeout=30, what="brokers 2 and 3 registered")
        _create(c, "lone", [2, 3], via=2, on=c.brokers)
        values = [b"l%d" % i for i in range(50)]
        _produce(c, "lone", values)
        c.kill(1)
        c.restart(1)
        c.agreed_leader([1], timeout=20)
        _create(c, "lone-after", [3, 2], via=3, on=c.brokers)
        _produce(c, "lone", [b"after"])
        got = confluent_consume(c.bootstrap, "lone", {0: 51}, timeout=30)[0]
        assert [m.value() for m in got] == [*values, b"after"]
