"""Metadata names a controller as Kafka's KRaft brokers do: a random alive broker per answer (any broker
forwards admin requests to the active controller), not the active controller itself. A long-lived
confluent-kafka AdminClient keeps creating topics across a kill -9 of the active controller. Runs on three
minikafka nodes and, with `--broker=kafka`, on three Apache Kafka 4.3 nodes.

librdkafka's admin client waits for the broker it last heard named as controller (until the request
times out): with either broker, killing exactly that node stalls it. So the test first lets the client
hear of a controller other than the active one, which Kafka's random answer provides within a few
Metadata requests and an answer naming the active controller never would."""
from __future__ import annotations

import sys
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from tests.conftest import ROOT, broker_kind
from tests.support.helpers import RawClient

pytestmark = pytest.mark.serial  # three processes (three JVMs on the oracle), a kill -9


class Three:
    """Three nodes of either broker: broker and controller ports by node id, kill -9 of one."""

    def __init__(self, kind: str, tmp) -> None:
        self.kind = kind
        if kind == "kafka":
            sys.path.insert(0, str(ROOT))
            from scripts.apache_kafka import KafkaCluster
            self.impl = KafkaCluster(3, work_dir=tmp).start(timeout=240)
            self.controller_ports = {n: self.impl.nodes[n].controller_port for n in self.impl.ids}
        else:
            from minikafka.testing import MiniKafkaCluster
            # Kafka's broker session and heartbeat defaults, as the Kafka nodes run them
            self.impl = MiniKafkaCluster(3, data_dir=tmp, config={"broker.session.timeout.ms": "9000",
                                                                  "broker.heartbeat.interval.ms": "2000"})
            self.controller_ports = dict(self.impl.controller_ports)
        self.ports = dict(self.impl.ports)
        self.killed: set[int] = set()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for n, p in self.ports.items() if n not in self.killed)

    def active_controller(self) -> int:
        for n, port in self.controller_ports.items():
            if n in self.killed:
                continue
            req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata",
                partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
            with RawClient(f"127.0.0.1:{port}", timeout=5) as c:
                leader = c.request(req, 1, DescribeQuorumResponse).topics[0].partitions[0].leader_id
            if leader > 0:
                return leader
        raise AssertionError("no active controller")

    def kill(self, n: int) -> None:
        self.impl.kill(n)
        self.killed.add(n)

    def close(self) -> None:
        if self.kind == "kafka":
            self.impl.kill_all()
            self.impl.cleanup()
        else:
            self.impl.close()


@pytest.fixture
def three(request, tmp_path):
    kind = broker_kind(request.config)
    if kind not in ("kafka", "minikafka"):
        pytest.skip("needs three brokers this test starts")
    nodes = Three(kind, tmp_path)
    try:
        yield nodes
    finally:
        nodes.close()


def named_controllers(port: int, count: int) -> Counter:
    with RawClient(f"127.0.0.1:{port}") as c:
        return Counter(c.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9,
                                 MetadataResponse).controller_id for _ in range(count))


def test_metadata_names_a_random_alive_broker_and_admin_survives_the_controller_kill(three):
    active = three.active_controller()
    # every node answers with alive brokers, not always the active controller (Kafka: getRandomAliveBrokerId)
    for n, port in three.ports.items():
        named = named_controllers(port, 40)
        assert set(named) <= set(three.ports) and len(named) >= 2, (n, named)

    admin = AdminClient({"bootstrap.servers": three.bootstrap})  # one client for the whole test
    admin.create_topics([NewTopic("ctl-before", 1, 3)])["ctl-before"].result(60)
    for _ in range(50):  # until this client last heard of a controller other than the active one
        if admin.list_topics(timeout=10).controller_id != active:
            break
    else:
        pytest.fail(f"every Metadata answer named the active controller {active}")
    three.kill(active)

    t0 = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        name = f"ctl-after-{attempt}"
        try:
            admin.create_topics([NewTopic(name, 1, 2)], request_timeout=10)[name].result(20)
            break
        except KafkaException as exc:
            assert time.monotonic() - t0 < 45, f"no topic created through the same AdminClient: {exc}"
    assert time.monotonic() - t0 < 45
    # and the survivors name only alive brokers once the dead one is fenced
    survivors = [n for n in three.ports if n != active]

    def dead_one_named() -> bool:
        return any(active in named_controllers(three.ports[n], 20) for n in survivors)
    deadline = time.monotonic() + 30
    while dead_one_named():
        assert time.monotonic() < deadline, f"node {active} still named as controller 30 s after its kill"
        time.sleep(0.5)
    assert name in admin.list_topics(timeout=10).topics
