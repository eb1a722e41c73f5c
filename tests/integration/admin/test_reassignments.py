"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) on a single node, raw protocol:
the only broker can only keep the replica it has (a success with nothing to move), any other broker
id is not registered, a cancel finds no reassignment, nothing is ever listed. Black-box: also runs
with --broker=kafka."""
from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
                                  ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse)

from tests.support.helpers import RawClient, metadata_raw, wait_topic_ready


def alter(bootstrap: str, topic: str, targets: dict[int, list[int] | None], version: int = 1,
          allow_rf_change: bool = True) -> AlterPartitionReassignmentsResponse:
    R = AlterPartitionReassignmentsRequest.ReassignableTopic
    req = AlterPartitionReassignmentsRequest(timeout_ms=10000, allow_replication_factor_change=allow_rf_change,
                                             topics=[R(name=topic, partitions=[
                                                 R.ReassignablePartition(partition_index=p, replicas=replicas)
                                                 for p, replicas in targets.items()])])
    with RawClient(bootstrap) as c:
        return c.request(req, version, AlterPartitionReassignmentsResponse)


def test_reassignments_on_a_single_node(broker):
    topic = f"move-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    wait_topic_ready(broker.bootstrap, topic, 2)
    with RawClient(broker.bootstrap) as c:
        [node] = [b.node_id for b in metadata_raw(c).brokers]
    resp = alter(broker.bootstrap, topic, {0: [node], 1: [node + 1], 7: [node]})
    assert resp.error_code == 0 and resp.allow_replication_factor_change is True
    [result] = resp.responses
    got = {p.partition_index: (p.error_code, p.error_message) for p in result.partitions}
    assert result.name == topic
    assert got[0] == (0, None)  # already there: nothing to do
    assert got[1] == (39, f"The manual partition assignment includes broker {node + 1}, but no such broker is "
                          f"registered.")
    assert got[7][0] == 3
    codes = {p.partition_index: p.error_code for p in alter(broker.bootstrap, topic, {0: None, 1: [], 2: [node, node]})
             .responses[0].partitions}
    assert codes == {0: 85, 1: 39, 2: 3}  # cancel without a move; empty target; unknown partition
    assert alter(broker.bootstrap, "no-such-topic", {0: [node]}).responses[0].partitions[0].error_code == 3
    with RawClient(broker.bootstrap) as c:
        listed = c.request(ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None), 0,
                           ListPartitionReassignmentsResponse)
        named = c.request(ListPartitionReassignmentsRequest(timeout_ms=10000, topics=[
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=topic, partition_indexes=[0, 1])]),
            0, ListPartitionReassignmentsResponse)
    assert (listed.error_code, listed.topics) == (0, [])
    assert (named.error_code, named.topics) == (0, [])
