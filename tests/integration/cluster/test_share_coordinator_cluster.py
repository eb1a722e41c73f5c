"""The share coordinator on a three-node cluster: a share-partition key's coordinator is the leader of its
`__share_group_state` partition (replication factor 3, min.isr 2 by Kafka's cluster defaults), FindCoordinator
key type SHARE names it from every node, another node answers NOT_COORDINATOR, and after kill -9 of the
coordinator's node the new leader has loaded the state written (answered only once replicated)."""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from tests.integration.groups.test_share_coordinator import (
    NOT_COORDINATOR,
    batches_of,
    initialize,
    kafka_uuid,
    read,
    summary,
    topic_id,
    write,
)
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

CONFIG = {"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "400", "share.coordinator.state.topic.num.partitions": "3",
          "share.coordinator.write.timeout.ms": "3000"}


def find(c: RawClient, key: str):
    resp = c.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6, FindCoordinatorResponse)
    return resp.coordinators[0]


def test_share_state_fails_over(tmp_path):
    with running(Cluster(tmp_path, config=CONFIG)) as cluster:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("t", 2, 3)])["t"].result(30)
        node = cluster.nodes[cluster.brokers[0]]
        wait_until(lambda: _has_topic(node.bootstrap, "t"), 30, 0.2, "topic t")
        tid = topic_id(node.bootstrap, "t")
        group, key = "sg", f"sg:{kafka_uuid(tid)}:0"
        with RawClient(node.bootstrap) as c:
            wait_until(lambda: find(c, key).error_code == 0, 30, 0.3, "share coordinator")
            coordinator = find(c, key).node_id
        with RawClient(node.bootstrap) as c:
            state_topic = metadata_raw(c, ["__share_group_state"], version=12).topics[0]
        assert state_topic.is_internal and len(state_topic.partitions) == 3
        assert all(len(p.replica_nodes) == 3 for p in state_topic.partitions)  # Kafka's cluster default
        coord = cluster.nodes[coordinator]
        other = cluster.nodes[next(n for n in cluster.brokers if n != coordinator)]
        with RawClient(coord.bootstrap) as c:
            wait_until(lambda: summary(c, group, tid, 0, -1).error_code == 0, 30, 0.2, "partition loaded")
            assert initialize(c, group, tid, 0, 1, 0).error_code == 0
            assert write(c, group, tid, 0, 1, 3, 4, [(4, 9, 2, 1)], dcc=6).error_code == 0
            assert read(c, group, tid, 0, 3).error_code == 0
        with RawClient(other.bootstrap) as c:
            assert read(c, group, tid, 0, 3).error_code == NOT_COORDINATOR
            assert find(c, key).node_id == coordinator
        cluster.kill(coordinator)
        survivor = cluster.nodes[next(n for n in cluster.brokers if n != coordinator)]

        def moved():
            with RawClient(survivor.bootstrap, timeout=3.0) as c:
                f = find(c, key)
            return f.node_id if f.error_code == 0 and f.node_id != coordinator else None
        new = wait_until(moved, 30, 0.3, "a new share coordinator")
        with RawClient(cluster.nodes[new].bootstrap) as c:
            def state():
                r = read(c, group, tid, 0, 3)
                return r if r.error_code == 0 else None
            r = wait_until(state, 30, 0.2, "state loaded on the new coordinator")
            assert (r.state_epoch, r.start_offset, batches_of(r)) == (1, 4, [(4, 9, 2, 1)])
            s = summary(c, group, tid, 0, -1)
            assert (s.leader_epoch, s.delivery_complete_count) == (3, 6)


def _has_topic(bootstrap: str, name: str) -> bool:
    with RawClient(bootstrap) as c:
        md = metadata_raw(c, [name], version=12)
    return md.topics[0].error_code == 0 and all(p.leader_id >= 0 for p in md.topics[0].partitions)
