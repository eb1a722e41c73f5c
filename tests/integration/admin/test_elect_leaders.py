"""ElectLeaders (API 43) on a single node, raw protocol: the only replica already leads, so a named
partition answers ELECTION_NOT_NEEDED, an unknown one UNKNOWN_TOPIC_OR_PARTITION, and a request for
all partitions (null) lists none. Black-box: also runs with --broker=kafka."""
from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from tests.support.helpers import RawClient, wait_topic_ready


def elect(bootstrap: str, partitions, version: int = 2) -> ElectLeadersResponse:
    T = ElectLeadersRequest.TopicPartitions
    req = ElectLeadersRequest(election_type=0, timeout_ms=10000, topic_partitions=None if partitions is None else [
        T(topic=t, partitions=ps) for t, ps in partitions.items()])
    with RawClient(bootstrap) as c:
        return c.request(req, version, ElectLeadersResponse)


def test_preferred_election_on_a_single_node(broker):
    topic = f"elect-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    wait_topic_ready(broker.bootstrap, topic, 2)
    resp = elect(broker.bootstrap, {topic: [0, 1, 7]})
    assert resp.error_code == 0
    [result] = resp.replica_election_results
    got = {p.partition_id: (p.error_code, p.error_message) for p in result.partition_result}
    assert result.topic == topic
    assert got[0] == got[1] == (84, "Leader election not needed for topic partition.")
    assert got[7] == (3, f"No such partition as {topic}-7")
    everything = elect(broker.bootstrap, None)
    assert everything.error_code == 0  # every topic listed (as Kafka 4.3), none with a partition to elect
    assert topic in {r.topic for r in everything.replica_election_results}
    assert all(r.partition_result == [] for r in everything.replica_election_results)
