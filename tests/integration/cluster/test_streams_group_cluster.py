"""Streams groups (KIP-1071) on a three-node cluster: the group's coordinator (leader of its
`__consumer_offsets` partition) has the missing internal topics created through the active controller,
assigns the tasks, and after a kill -9 of its node the next coordinator has the group from the replicated
records (topology, members, epochs, target assignment)."""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.integration.groups.test_streams_group_protocol import (
    describe,
    hb,
    join_until_assigned,
    topology,
)
from minikafka.coordinator.partitioning import partition_for
from tests.support.cluster_harness import Cluster, running
from tests.support.group_helpers import create_topic
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

CONFIG = {"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "400", "group.initial.rebalance.delay.ms": "0",
          "offsets.topic.num.partitions": "3",
          "group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0",
          "default.replication.factor": "3"}
GROUP = "sg-cluster-app"


def _coordinator(cluster: Cluster, via: int) -> int:
    with RawClient(cluster.nodes[via].bootstrap, timeout=3.0) as c:
        r = c.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]), 4)
    return r.coordinators[0].node_id if r.coordinators[0].error_code == 0 else -1


def test_streams_group_on_a_cluster(tmp_path):
    with running(Cluster(tmp_path, config=CONFIG)) as cluster:
        first = cluster.brokers[0]
        source = create_topic(cluster.nodes[first].bootstrap, "sg-cluster-in", 3)
        wait_until(lambda: _coordinator(cluster, first) > 0, 30, 0.3, "the group coordinator")
        coord = _coordinator(cluster, first)
        topo = topology(source, GROUP)
        with RawClient(cluster.nodes[coord].bootstrap) as c:
            # the first writes wait for the new __consumer_offsets partition's followers (retriable errors)
            wait_until(lambda: hb(c, GROUP, "m1", 0, topo=topo).error_code == 0, 30, 0.3, "the first heartbeat")
            st = join_until_assigned(c, GROUP, "m1", topo, timeout=60)
            assert st["active"] == {"0": {0, 1, 2}, "1": {0, 1, 2}}
            md = metadata_raw(c, [f"{GROUP}-agg-repartition", f"{GROUP}-store-changelog"], version=12)
            assert [len(t.partitions) for t in md.topics] == [3, 3]
            assert all(len(p.replica_nodes) == 3 for t in md.topics for p in t.partitions)
            before = describe(c, GROUP)
            # every replica of the group's partition in sync before its leader dies
            partition = partition_for(GROUP, 3)
            wait_until(lambda: len(metadata_raw(c, ["__consumer_offsets"]).topics[0].partitions[partition].isr_nodes)
                       == 3, 30, 0.3, "the group's partition fully replicated")
        cluster.kill(coord)
        survivor = next(n for n in cluster.brokers if n != coord)
        def loaded_elsewhere() -> int:
            """The new coordinator, once it answers for the group (leadership may move more than once)."""
            node = _coordinator(cluster, survivor)
            if node in (-1, coord):
                return 0
            with RawClient(cluster.nodes[node].bootstrap, timeout=3.0) as probe:
                return node if describe(probe, GROUP).error_code == 0 else 0
        new = wait_until(loaded_elsewhere, 60, 0.5, "a new coordinator with the group loaded")
        with RawClient(cluster.nodes[new].bootstrap) as c:
            after = describe(c, GROUP)
            assert (after.group_epoch, after.assignment_epoch, after.topology.epoch) == \
                (before.group_epoch, before.assignment_epoch, 1)
            assert [(m.member_id, m.member_epoch) for m in after.members] == [("m1", st["epoch"])]
            r = hb(c, GROUP, "m1", st["epoch"], active=st["active"], standby={}, warmup={})
            assert r.error_code == 0 and r.member_epoch == st["epoch"], r
