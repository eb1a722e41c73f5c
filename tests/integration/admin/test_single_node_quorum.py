"""A single node's broker listener answers DescribeQuorum (API 55) as the sole voter and leader of its
metadata quorum, as Kafka 4.3.1's single combined node does, so `kafka-metadata-quorum --bootstrap-server`
works; and UnregisterBroker (API 64) of an id that is not registered is BROKER_ID_NOT_REGISTERED with
Kafka's message. Black-box (also runs with --broker=kafka); the node's own id is never unregistered here
(Kafka's broker would stay out of the cluster until restarted)."""
from __future__ import annotations

import re
import sys
import time

import pytest
from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from minikafka.protocol.messages import UnregisterBrokerRequest, UnregisterBrokerResponse
from tests.conftest import ROOT
from tests.support.helpers import RawClient, metadata_raw, wait_broker_connections_closed

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

UNKNOWN_TOPIC_OR_PARTITION, BROKER_ID_NOT_REGISTERED = 3, 102
T = DescribeQuorumRequest.TopicData


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


def describe(bootstrap: str, topic: str, partition: int, version: int) -> DescribeQuorumResponse:
    req = DescribeQuorumRequest(topics=[T(topic_name=topic, partitions=[T.PartitionData(partition_index=partition)])])
    with RawClient(bootstrap) as c:
        return c.request(req, version, DescribeQuorumResponse)


def node_id(bootstrap: str) -> int:
    with RawClient(bootstrap) as c:
        (broker,) = metadata_raw(c, [], version=12).brokers
        return broker.node_id


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_names_the_node_as_sole_voter_and_leader(shared_broker, version):
    me = node_id(shared_broker.bootstrap)
    before = int(time.time() * 1000)
    resp = describe(shared_broker.bootstrap, "__cluster_metadata", 0, version)
    assert resp.error_code == 0
    (topic,) = resp.topics
    (p,) = topic.partitions
    assert (topic.topic_name, p.partition_index, p.error_code) == ("__cluster_metadata", 0, 0)
    assert (p.leader_id, p.observers) == (me, [])
    assert p.leader_epoch >= 1 and p.high_watermark >= 0
    (voter,) = p.current_voters
    assert voter.replica_id == me and voter.log_end_offset == p.high_watermark
    if version >= 1:  # the leader reports itself fetched and caught up now
        assert voter.last_fetch_timestamp >= before - 1000 and voter.last_caught_up_timestamp >= before - 1000
    if version >= 2:
        assert resp.error_message == "" and p.error_message == ""
        assert [n.node_id for n in resp.nodes] == [me]


@pytest.mark.parametrize("topic, partition", [("__cluster_metadata", 1), ("other", 0)])
def test_describe_quorum_of_another_partition_is_unknown(shared_broker, topic, partition):
    resp = describe(shared_broker.bootstrap, topic, partition, 2)
    assert resp.error_code == 0 and resp.nodes == []
    (t,) = resp.topics
    (p,) = t.partitions
    assert (t.topic_name, p.partition_index, p.error_code, p.error_message) == (
        topic, partition, UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    assert (p.leader_id, p.leader_epoch, p.high_watermark, p.current_voters, p.observers) == (0, 0, 0, [], [])


def test_kafka_metadata_quorum_describe_status(shared_broker):
    lab.fetch()
    me = node_id(shared_broker.bootstrap)
    res = lab.run_tool("kafka-metadata-quorum", ["--bootstrap-server", shared_broker.bootstrap, "describe", "--status"],
                       timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", res.stdout, re.M))
    with RawClient(shared_broker.bootstrap) as c:
        cluster_id = metadata_raw(c, [], version=12).cluster_id
    assert fields["ClusterId"] == cluster_id
    assert int(fields["LeaderId"]) == me and int(fields["LeaderEpoch"]) >= 1
    assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"], fields["CurrentObservers"]) == ("0", "0", "[]")
    assert fields["CurrentVoters"].startswith(f'[{{"id": {me}')
    res = lab.run_tool("kafka-metadata-quorum", ["--bootstrap-server", shared_broker.bootstrap, "describe",
                                                 "--replication"], timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line.split() for line in res.stdout.splitlines()[1:] if line.strip()]
    assert [(int(r[0]), r[-1]) for r in rows] == [(me, "Leader")]


def test_unregister_broker_of_an_unknown_id(shared_broker):
    me = node_id(shared_broker.bootstrap)
    with RawClient(shared_broker.bootstrap) as c:
        for broker_id in (me + 98, -1):
            resp = c.request(UnregisterBrokerRequest(broker_id=broker_id), 0, UnregisterBrokerResponse)
            assert (resp.error_code, resp.error_message) == (
                BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
        assert [b.node_id for b in metadata_raw(c, [], version=12).brokers] == [me]  # nothing changed
